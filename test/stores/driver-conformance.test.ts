import { driverConformanceSuite } from '../conformance/driver/suite.ts';
import { DRIVER_HARNESSES } from '../support/driver-harnesses.ts';

for (const factory of DRIVER_HARNESSES) {
  describe(`driver conformance: ${factory.driver}`, () => driverConformanceSuite(factory));
}

import type { protos } from '@google-cloud/bigtable';
import type { Mutation } from '../store.ts';

type ProtoMutation = protos.google.bigtable.v2.IMutation;

/** toProtoMutation maps one contract mutation onto Bigtable's own, which has the same four kinds. */
export function toProtoMutation(mutation: Mutation): ProtoMutation {
  switch (mutation.type) {
    case 'set':
      return {
        setCell: {
          familyName: mutation.family,
          columnQualifier: mutation.column,
          // int64 as a decimal string: exact beyond 2^53, and protobufjs takes it as is.
          timestampMicros: mutation.timestampMicros.toString(),
          value: mutation.value,
        },
      };
    case 'deleteColumn':
      // Without a time range: every version of the column.
      return { deleteFromColumn: { familyName: mutation.family, columnQualifier: mutation.column } };
    case 'deleteFamily':
      return { deleteFromFamily: { familyName: mutation.family } };
    case 'deleteRow':
      return { deleteFromRow: {} };
  }
}

/** The first family, in mutation order, that `mutations` name and `has` denies; undefined if none. */
export function firstMissingFamily(mutations: readonly Mutation[], has: (family: string) => boolean): string | undefined {
  for (const mutation of mutations) {
    if (mutation.type !== 'deleteRow' && !has(mutation.family)) return mutation.family;
  }
  return undefined;
}

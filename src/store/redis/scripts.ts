import { createHash } from 'node:crypto';
import { PACKED_MUTATION } from './row-codec.ts';

/**
 * The Lua scripts of the Redis store. Each runs atomically in Redis and touches the keys of one
 * hash-tag slot only (catalog scripts the instance's slot, table and row scripts the table's),
 * so that they also run in Redis Cluster. They use nothing newer than Redis 7.0.
 *
 * A script is run by the SHA1 of its source, so a script whose arguments change is a new script
 * to Redis: during a rolling update, processes of the old and the new version each run their
 * own, side by side in Redis's script cache. Only what a script stores must stay the same.
 */
export interface Script {
  readonly name: string;
  readonly source: string;
  readonly sha1: string;
}

function script(name: string, source: string): Script {
  return { name, source, sha1: createHash('sha1').update(source).digest('hex') };
}

// Redis's clock, for the bookkeeping of tables, which every process shares. Scripts may call
// TIME: since Redis 7.0 they are replicated by their effects only.
const CLOCK = `
local clock = redis.call('TIME')
local nowMs = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
`;

/**
 * registerTable: KEYS tables; ARGV table.
 * Puts the table's name in the instance's list, stamped with Redis's time, which it returns:
 * the record must then be written before that time plus the grace period (createTable), or not
 * at all, so that a name is never pruned from the list while its table is being created.
 */
export const REGISTER_TABLE = script(
  'registerTable',
  `${CLOCK}
redis.call('HSET', KEYS[1], ARGV[1], nowMs)
return nowMs`,
);

/**
 * createTable: KEYS the table's record; ARGV generation, families (JSON), the time (ms) after
 * which it must not create.
 * 1 when created; 0 when the table exists (nothing changed); 2 when too late (nothing created).
 */
export const CREATE_TABLE = script(
  'createTable',
  `if redis.call('HEXISTS', KEYS[1], 'generation') == 1 then return 0 end
${CLOCK}
if nowMs > tonumber(ARGV[3]) then return 2 end
redis.call('HSET', KEYS[1], 'generation', ARGV[1], 'families', ARGV[2])
return 1`,
);

/**
 * deleteTable: KEYS the table's record.
 * Takes the generation out of the record and marks it deleted, for the reclaimer, in one step.
 * Returns the generation, or nil when there is no such table.
 */
export const DELETE_TABLE = script(
  'deleteTable',
  `local generation = redis.call('HGET', KEYS[1], 'generation')
if not generation then return false end
${CLOCK}
redis.call('HDEL', KEYS[1], 'generation', 'families')
redis.call('HSET', KEYS[1], 'deleted:' .. generation, nowMs)
return generation`,
);

/**
 * readCatalog: KEYS tables, catalog state.
 * {Redis's time (ms), the catalog state ("" when there is none), then every name and the time
 * it was registered}, read together.
 */
export const READ_CATALOG = script(
  'readCatalog',
  `${CLOCK}
return {nowMs, redis.call('GET', KEYS[2]) or '', redis.call('HGETALL', KEYS[1])}`,
);

/**
 * pruneCatalog: KEYS tables; ARGV table, the registration time read before the table's record
 * was found empty. Removes the name only if it has not been registered again since (1), else 0.
 */
export const PRUNE_CATALOG = script(
  'pruneCatalog',
  `if redis.call('HGET', KEYS[1], ARGV[1]) ~= ARGV[2] then return 0 end
redis.call('HDEL', KEYS[1], ARGV[1])
return 1`,
);

/**
 * beginRebuild: KEYS catalog state; ARGV a new rebuild ID.
 * nil when the list is complete; otherwise the ID of the rebuild under way (this one, when none
 * was), which finishRebuild names.
 */
export const BEGIN_REBUILD = script(
  'beginRebuild',
  `local state = redis.call('GET', KEYS[1])
if state and string.sub(state, 1, 9) == 'complete ' then return false end
if state and string.sub(state, 1, 11) == 'rebuilding ' then return string.sub(state, 12) end
redis.call('SET', KEYS[1], 'rebuilding ' .. ARGV[1])
return ARGV[1]`,
);

/** registerFound: KEYS tables; ARGV table names found by a rebuild. Registers those not listed. */
export const REGISTER_FOUND = script(
  'registerFound',
  `${CLOCK}
for i = 1, #ARGV do redis.call('HSETNX', KEYS[1], ARGV[i], nowMs) end
return #ARGV`,
);

/**
 * finishRebuild: KEYS catalog state; ARGV the rebuild's ID.
 * 1 when the list is complete now; 0 when the state is no longer that rebuild's (the instance's
 * slot lost its data again meanwhile): the rebuild must start over.
 */
export const FINISH_REBUILD = script(
  'finishRebuild',
  `local state = redis.call('GET', KEYS[1])
if state == 'complete ' .. ARGV[1] then return 1 end
if state ~= 'rebuilding ' .. ARGV[1] then return 0 end
redis.call('SET', KEYS[1], 'complete ' .. ARGV[1])
return 1`,
);

/**
 * mutateRow: KEYS the table's record, rows (the index), row; ARGV generation, row key, the
 * caller's clock in microseconds (retention is judged by the clock that assigns timestamps), the
 * maxAge of the families that have one ("<family> <seconds> …", empty when none), then the
 * mutations packed in one string (packMutations in row-codec.ts): op ("s" set, "c"
 * deleteColumn, "f" deleteFamily, "r" deleteRow), family, column, timestamp, value.
 * Returns 1 when the generation is no longer the table's (nothing written), 0 when applied. The
 * caller has checked the families against the generation's (they never change): the record,
 * checked here, says the generation is still the table's.
 *
 * A set never replaces a value with a newer timestamp (the store keeps the latest version only),
 * and one already past its family's maxAge is not written. After the mutations, cells past their
 * family's maxAge are removed from the row; an empty row is deleted and leaves the index.
 */
export const MUTATE_ROW = script(
  'mutateRow',
  `if redis.call('HGET', KEYS[1], 'generation') ~= ARGV[1] then return 1 end
local nowMicros = tonumber(ARGV[3])
local maxAge, pruning = {}, ARGV[4] ~= ''
if pruning then
  for family, age in string.gmatch(ARGV[4], '(%S+) (%S+)') do maxAge[family] = tonumber(age) end
end
local function expired(family, ts)
  local age = maxAge[family]
  return age ~= nil and tonumber(ts) < nowMicros - age * 1000000
end
-- Timestamps are canonical decimal int64s, beyond a double's exact range: compare them as text.
local function later(a, b)
  local aNegative, bNegative = string.byte(a, 1) == 45, string.byte(b, 1) == 45
  if aNegative ~= bNegative then return bNegative end
  if #a ~= #b then return (#a > #b) ~= aNegative end
  if a == b then return false end
  return (a > b) ~= aNegative
end
local row, mutations, at = KEYS[3], ARGV[5], 1
while at <= #mutations do
  local op, family, column, ts, value
  op, family, column, ts, value, at = struct.unpack('${PACKED_MUTATION}', mutations, at)
  if op == 's' then
    if not expired(family, ts) then
      local field = family .. ':' .. column
      local current = redis.call('HGET', row, field)
      if not current or not later(string.sub(current, 1, string.find(current, ':', 1, true) - 1), ts) then
        redis.call('HSET', row, field, ts .. ':' .. value)
      end
    end
  elseif op == 'c' then
    redis.call('HDEL', row, family .. ':' .. column)
  elseif op == 'f' then
    local prefix = family .. ':'
    for _, field in ipairs(redis.call('HKEYS', row)) do
      if string.sub(field, 1, #prefix) == prefix then redis.call('HDEL', row, field) end
    end
  else
    redis.call('DEL', row)
  end
end
if pruning then
  local cells = redis.call('HGETALL', row)
  for i = 1, #cells, 2 do
    local field, value = cells[i], cells[i + 1]
    local family = string.sub(field, 1, string.find(field, ':', 1, true) - 1)
    if expired(family, string.sub(value, 1, string.find(value, ':', 1, true) - 1)) then redis.call('HDEL', row, field) end
  end
end
if redis.call('EXISTS', row) == 1 then
  redis.call('ZADD', KEYS[2], 0, ARGV[2])
else
  redis.call('ZREM', KEYS[2], ARGV[2])
end
return 0`,
);

/**
 * readRows: KEYS the table's record, then one row hash per key asked for; ARGV generation.
 * nil when the generation is no longer the table's; otherwise the fields and values of each
 * row, in KEYS order.
 */
export const READ_ROWS = script(
  'readRows',
  `if redis.call('HGET', KEYS[1], 'generation') ~= ARGV[1] then return false end
local out = {}
for i = 2, #KEYS do out[i - 1] = redis.call('HGETALL', KEYS[i]) end
return out`,
);

/**
 * scanRows: KEYS the table's record, rows (the index); ARGV generation, row-key prefix, lower and
 * upper lex bound, "1" for descending order, most index entries to read.
 * nil when the generation is no longer the table's; otherwise {key, fields of that row, key,
 * fields, …}. The row hashes are not in KEYS: their names come from the index, and they share
 * the index's hash tag and so its slot.
 */
export const SCAN_ROWS = script(
  'scanRows',
  `if redis.call('HGET', KEYS[1], 'generation') ~= ARGV[1] then return false end
local keys
if ARGV[5] == '1' then
  keys = redis.call('ZRANGE', KEYS[2], ARGV[4], ARGV[3], 'BYLEX', 'REV', 'LIMIT', 0, tonumber(ARGV[6]))
else
  keys = redis.call('ZRANGE', KEYS[2], ARGV[3], ARGV[4], 'BYLEX', 'LIMIT', 0, tonumber(ARGV[6]))
end
local out = {}
for _, key in ipairs(keys) do
  out[#out + 1] = key
  out[#out + 1] = redis.call('HGETALL', ARGV[2] .. key)
end
return out`,
);

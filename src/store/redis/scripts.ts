import { createHash } from 'node:crypto';
import { REDIS_LIMITS } from './limits.ts';
import { PACKED_CONDITION, PACKED_MUTATION, PACKED_RULE } from './row-codec.ts';

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

// The row scripts (mutateRow, checkAndMutateRow, readModifyWriteRow) share their first four
// arguments and these pieces, so that a row is written, retention judged and the change recorded
// the same way by each: KEYS the table's record, rows (the index), row, the generation's change
// stream; ARGV generation, row key, the caller's
// clock in microseconds (retention is judged by the clock that assigns timestamps), the maxAge of
// the families that have one ("<family> <seconds> …", empty when none).
const ROW_PREAMBLE = `if redis.call('HGET', KEYS[1], 'generation') ~= ARGV[1] then return GONE end
local row = KEYS[3]
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
-- A field is "<family>:<column>", a stored cell "<timestamp>:<value>": the first colon ends each.
local function familyOf(field)
  return string.sub(field, 1, string.find(field, ':', 1, true) - 1)
end
local function splitCell(stored)
  local colon = string.find(stored, ':', 1, true)
  return string.sub(stored, 1, colon - 1), string.sub(stored, colon + 1)
end
-- The column's latest live version (timestamp, value), or nothing when it has none.
local function liveCell(family, column)
  local stored = redis.call('HGET', row, family .. ':' .. column)
  if not stored then return nil end
  local ts, value = splitCell(stored)
  if expired(family, ts) then return nil end
  return ts, value
end
local function applyMutations(mutations)
  local at = 1
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
end
-- After a write: cells past their family's maxAge leave the row; an empty row is deleted and
-- leaves the index.
local function finishRow()
  if pruning then
    local cells = redis.call('HGETALL', row)
    for i = 1, #cells, 2 do
      local field, value = cells[i], cells[i + 1]
      if expired(familyOf(field), splitCell(value)) then redis.call('HDEL', row, field) end
    end
  end
  if redis.call('EXISTS', row) == 1 then
    redis.call('ZADD', KEYS[2], 0, ARGV[2])
  else
    redis.call('ZREM', KEYS[2], ARGV[2])
  end
end
-- The change, in the same script as the write: an entry of the generation's stream, its ID
-- given by Redis (its clock in ms, then a sequence), fields "key" (the row key) and "mutations"
-- (packed as the mutateRow script's argument). Entries older than the retention go with it, a
-- whole stream node at a time (MINID ~), so trimming costs a write next to nothing.
local function recordChange(mutations)
  local clock = redis.call('TIME')
  local minId = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000) - ${REDIS_LIMITS.changeRetentionSeconds * 1000}
  redis.call('XADD', KEYS[4], 'MINID', '~', string.format('%d', minId), '*', 'key', ARGV[2], 'mutations', mutations)
end
`;

/** A row script: its own source after ROW_PREAMBLE, which answers `gone` when the generation is no longer the table's. */
function rowScript(name: string, gone: string, source: string): Script {
  return script(name, `local GONE = ${gone}\n${ROW_PREAMBLE}${source}`);
}

/**
 * mutateRow: KEYS and ARGV 1-4 as every row script's (ROW_PREAMBLE), then the mutations packed
 * in one string (packMutations in row-codec.ts): op ("s" set, "c" deleteColumn, "f"
 * deleteFamily, "r" deleteRow), family, column, timestamp, value.
 * Returns 1 when the generation is no longer the table's (nothing written), 0 when applied, and
 * then the mutations are recorded as the change (ROW_PREAMBLE's recordChange). The caller has checked the families against the generation's (they never change): the record,
 * checked here, says the generation is still the table's.
 *
 * A set never replaces a value with a newer timestamp (the store keeps the latest version only),
 * and one already past its family's maxAge is not written. After the mutations, cells past their
 * family's maxAge are removed from the row; an empty row is deleted and leaves the index.
 */
export const MUTATE_ROW = rowScript(
  'mutateRow',
  '1',
  `applyMutations(ARGV[5])
finishRow()
recordChange(ARGV[5])
return 0`,
);

/**
 * checkAndMutateRow: KEYS and ARGV 1-4 as every row script's (ROW_PREAMBLE), then the conditions
 * packed in one string (packConditions in row-codec.ts: op "r" rowExists, "f" familyExists, "c"
 * columnExists, "e" columnEquals; "1" or "0" for exists; family, column, value), the mutations
 * to apply when they all hold and those to apply otherwise (each as mutateRow's).
 * Returns -1 when the generation is no longer the table's (nothing written), 1 when the
 * conditions held, 0 when not; the branch taken is applied, and recorded, as mutateRow applies
 * and records its mutations; an empty branch writes and records nothing.
 *
 * A condition sees live cells only: a cell past its family's maxAge does not exist for it, even
 * while it is still in the hash. The caller has checked every family named against the
 * generation's.
 */
export const CHECK_AND_MUTATE_ROW = rowScript(
  'checkAndMutateRow',
  '-1',
  `-- The row's fields and cells, read once, and only for a row or family condition.
local cells
local function anyLiveCell(prefix)
  if not pruning and prefix == '' then return redis.call('EXISTS', row) == 1 end
  cells = cells or redis.call('HGETALL', row)
  for i = 1, #cells, 2 do
    local field = cells[i]
    if string.sub(field, 1, #prefix) == prefix and not expired(familyOf(field), splitCell(cells[i + 1])) then return true end
  end
  return false
end
local function holds(op, exists, family, column, value)
  if op == 'r' then return anyLiveCell('') == exists end
  if op == 'f' then return anyLiveCell(family .. ':') == exists end
  local _, current = liveCell(family, column)
  if op == 'c' then return (current ~= nil) == exists end
  return current == value
end
local conditions, at, matched = ARGV[5], 1, true
while matched and at <= #conditions do
  local op, flag, family, column, value
  op, flag, family, column, value, at = struct.unpack('${PACKED_CONDITION}', conditions, at)
  matched = holds(op, flag == '1', family, column, value)
end
local mutations = matched and ARGV[6] or ARGV[7]
if mutations ~= '' then
  applyMutations(mutations)
  finishRow()
  recordChange(mutations)
end
if matched then return 1 end
return 0`,
);

/**
 * readModifyWriteRow: KEYS and ARGV 1-4 as every row script's (ROW_PREAMBLE), then the rules
 * packed in one string (packRules in row-codec.ts): op ("i" increment, "a" append), family,
 * column, operand (the amount as 8 big-endian bytes, or the bytes to append).
 * Returns nil when the generation is no longer the table's (nothing written); {0, family,
 * bytes} when an increment met a value that is not 8 bytes (nothing written); otherwise {1,
 * field, stored cell, field, stored cell…}, each column touched once, as it now is. The change
 * recorded is one set per column touched, as stored.
 *
 * Each rule reads the column's latest live version as the earlier rules left it (an expired one
 * counts as none). Every rule is decided before anything is written. Each column touched gets
 * one new version at the caller's clock, or at the replaced version's timestamp when that is
 * later. Counters are added as 8 bytes, one byte at a time with its carry, so the sum wraps
 * modulo 2^64 exactly as two's-complement int64 does (Lua 5.1 numbers are doubles).
 */
export const READ_MODIFY_WRITE_ROW = rowScript(
  'readModifyWriteRow',
  'false',
  `local function add64(a, b)
  local sum, carry = {}, 0
  for i = 8, 1, -1 do
    local byte = string.byte(a, i) + string.byte(b, i) + carry
    sum[i] = byte % 256
    carry = math.floor(byte / 256)
  end
  return string.char(unpack(sum, 1, 8))
end
local ZERO = string.rep('\\0', 8)
local touched, order = {}, {}
local rules, at = ARGV[5], 1
while at <= #rules do
  local op, family, column, operand
  op, family, column, operand, at = struct.unpack('${PACKED_RULE}', rules, at)
  local field = family .. ':' .. column
  local before = touched[field]
  local ts, value
  if before then
    ts, value = before[1], before[2]
  else
    ts, value = liveCell(family, column)
    order[#order + 1] = {field, family, column}
  end
  if op == 'a' then
    value = (value or '') .. operand
  else
    value = value or ZERO
    if #value ~= 8 then return {0, family, #value} end
    value = add64(value, operand)
  end
  if not ts or later(ARGV[3], ts) then ts = ARGV[3] end
  touched[field] = {ts, value}
end
local out, sets = {1}, {}
for _, touch in ipairs(order) do
  local field, family, column = touch[1], touch[2], touch[3]
  local ts, value = touched[field][1], touched[field][2]
  local stored = ts .. ':' .. value
  redis.call('HSET', row, field, stored)
  out[#out + 1] = field
  out[#out + 1] = stored
  sets[#sets + 1] = struct.pack('${PACKED_MUTATION}', 's', #family, family, #column, column, #ts, ts, #value, value)
end
finishRow()
recordChange(table.concat(sets))
return out`,
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

/**
 * feedStart: KEYS the table's record, a generation's change stream; ARGV that generation.
 * {1 when the record still names the generation (0 when not), Redis's time (ms), the stream's
 * last generated ID ("0-0" when there is no stream yet), 1 when entries were trimmed from it (0
 * when not)}. Read together, so that a feed starting "now" starts right after the last change
 * committed before it.
 */
export const FEED_START = script(
  'feedStart',
  `${CLOCK}
local current = redis.call('HGET', KEYS[1], 'generation') == ARGV[1] and 1 or 0
if redis.call('EXISTS', KEYS[2]) == 0 then return {current, nowMs, '0-0', 0} end
local info = redis.call('XINFO', 'STREAM', KEYS[2])
local fields = {}
for i = 1, #info, 2 do fields[info[i]] = info[i + 1] end
local trimmed = tonumber(fields['entries-added']) > tonumber(fields['length']) and 1 or 0
return {current, nowMs, fields['last-generated-id'], trimmed}`,
);

/**
 * readChanges: KEYS the table's record, a generation's change stream; ARGV that generation, the
 * ID to read after, the most entries to read.
 * {1 when the record still names the generation (0 when not), Redis's time (ms), the entries
 * after the ID}, read together: when the generation is gone, no change can follow the entries
 * read; when there are none, every change still to come will have an ID of that time or later.
 */
export const READ_CHANGES = script(
  'readChanges',
  `${CLOCK}
local current = redis.call('HGET', KEYS[1], 'generation') == ARGV[1] and 1 or 0
return {current, nowMs, redis.call('XRANGE', KEYS[2], '(' .. ARGV[2], '+', 'COUNT', tonumber(ARGV[3]))}`,
);

import { createHash } from 'node:crypto';
import { PACKED_MUTATION } from './row-codec.ts';

/**
 * The Lua scripts of the Redis store. Each runs atomically in Redis and touches the keys of one
 * hash-tag slot only (catalog scripts the instance's slot, row scripts the table generation's),
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

// Redis's clock, for the catalog's bookkeeping, which every process shares. Scripts may call
// TIME: since Redis 7.0 they are replicated by their effects only.
const CLOCK = `
local clock = redis.call('TIME')
local nowMs = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
`;

/**
 * beginCreate: KEYS tables, reclaim; ARGV table, reclaim member, grace ms.
 * Refuses (0) when the table exists; otherwise registers the new generation for reclaiming after
 * the grace period (1), so that keys of a creation that never commits are removed in the end.
 */
export const BEGIN_CREATE = script(
  'beginCreate',
  `${CLOCK}
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 1 then return 0 end
redis.call('ZADD', KEYS[2], nowMs + tonumber(ARGV[3]), ARGV[2])
return 1`,
);

/**
 * commitCreate: KEYS tables, reclaim; ARGV table, reclaim member, catalog entry.
 * Publishes the table (1) unless it exists by now (0) or its generation is already due for
 * reclaiming (2): then the meta key may be gone, and the table must not be published.
 */
export const COMMIT_CREATE = script(
  'commitCreate',
  `${CLOCK}
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 1 then return 0 end
local due = redis.call('ZSCORE', KEYS[2], ARGV[2])
if not due or tonumber(due) <= nowMs then return 2 end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[3])
redis.call('ZREM', KEYS[2], ARGV[2])
return 1`,
);

/**
 * abandonCreate: KEYS reclaim; ARGV reclaim member. Makes an uncommitted generation due at once.
 */
export const ABANDON_CREATE = script(
  'abandonCreate',
  `if redis.call('ZSCORE', KEYS[1], ARGV[1]) then redis.call('ZADD', KEYS[1], 0, ARGV[1]) end
return 1`,
);

/**
 * beginDelete: KEYS tables, reclaim; ARGV table.
 * Removes the table from the catalog and queues its generation for reclaiming, in one step.
 * Returns the generation, or nil when there is no such table.
 */
export const BEGIN_DELETE = script(
  'beginDelete',
  `local entry = redis.call('HGET', KEYS[1], ARGV[1])
if not entry then return false end
local generation = cjson.decode(entry).generation
redis.call('HDEL', KEYS[1], ARGV[1])
redis.call('ZADD', KEYS[2], 0, ARGV[1] .. '/' .. generation)
return generation`,
);

/**
 * claimReclaim: KEYS tables, reclaim; ARGV reclaim member, table, generation.
 * 1 when the generation is due and not the table's live one: it is then marked due for good
 * (score 0), so that a slow commitCreate can no longer publish it. 0 otherwise; a stale entry
 * naming the live generation is dropped.
 */
export const CLAIM_RECLAIM = script(
  'claimReclaim',
  `${CLOCK}
local due = redis.call('ZSCORE', KEYS[2], ARGV[1])
if not due or tonumber(due) > nowMs then return 0 end
local entry = redis.call('HGET', KEYS[1], ARGV[2])
if entry and cjson.decode(entry).generation == ARGV[3] then
  redis.call('ZREM', KEYS[2], ARGV[1])
  return 0
end
if tonumber(due) ~= 0 then redis.call('ZADD', KEYS[2], 0, ARGV[1]) end
return 1`,
);

/**
 * mutateRow: KEYS meta, rows (the index), row; ARGV row key, the caller's clock in microseconds
 * (retention is judged by the clock that assigns timestamps), the maxAge of the families that
 * have one ("<family> <seconds> …", empty when none), then the mutations packed in one string
 * (packMutations in row-codec.ts): op ("s" set, "c" deleteColumn, "f" deleteFamily, "r"
 * deleteRow), family, column, timestamp, value.
 * Returns 1 when the table is gone (nothing written), 0 when applied. The caller has checked the
 * families against the generation's (they never change): the meta key's existence, checked
 * here, says the generation is still the table's.
 *
 * A set never replaces a value with a newer timestamp (the store keeps the latest version only),
 * and one already past its family's maxAge is not written. After the mutations, cells past their
 * family's maxAge are removed from the row; an empty row is deleted and leaves the index.
 */
export const MUTATE_ROW = script(
  'mutateRow',
  `if redis.call('EXISTS', KEYS[1]) == 0 then return 1 end
local nowMicros = tonumber(ARGV[2])
local maxAge, pruning = {}, ARGV[3] ~= ''
if pruning then
  for family, age in string.gmatch(ARGV[3], '(%S+) (%S+)') do maxAge[family] = tonumber(age) end
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
local row, mutations, at = KEYS[3], ARGV[4], 1
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
  redis.call('ZADD', KEYS[2], 0, ARGV[1])
else
  redis.call('ZREM', KEYS[2], ARGV[1])
end
return 0`,
);

/**
 * readRows: KEYS meta, then one row hash per key asked for.
 * nil when the table is gone; otherwise the fields and values of each row, in KEYS order.
 */
export const READ_ROWS = script(
  'readRows',
  `if redis.call('EXISTS', KEYS[1]) == 0 then return false end
local out = {}
for i = 2, #KEYS do out[i - 1] = redis.call('HGETALL', KEYS[i]) end
return out`,
);

/**
 * scanRows: KEYS meta, rows (the index); ARGV row-key prefix, lower and upper lex bound, "1" for
 * descending order, most index entries to read.
 * nil when the table is gone; otherwise {key, fields of that row, key, fields, …}. The row
 * hashes are not in KEYS: their names come from the index, and they share the index's hash tag
 * and so its slot.
 */
export const SCAN_ROWS = script(
  'scanRows',
  `if redis.call('EXISTS', KEYS[1]) == 0 then return false end
local keys
if ARGV[4] == '1' then
  keys = redis.call('ZRANGE', KEYS[2], ARGV[3], ARGV[2], 'BYLEX', 'REV', 'LIMIT', 0, tonumber(ARGV[5]))
else
  keys = redis.call('ZRANGE', KEYS[2], ARGV[2], ARGV[3], 'BYLEX', 'LIMIT', 0, tonumber(ARGV[5]))
end
local out = {}
for _, key in ipairs(keys) do
  out[#out + 1] = key
  out[#out + 1] = redis.call('HGETALL', ARGV[1] .. key)
end
return out`,
);

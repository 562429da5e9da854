-- helpers.lua — file-local helpers shared by every later file of the library.
--
-- Not FCALL-able. Everything here is a `local`, and the whole library is one Lua chunk, so the
-- Lua 5.1 limit of 200 active locals applies: later files wrap their private helpers in
-- `do ... end` blocks so that only these shared helpers stay live across files.
--
-- Keys touched: none directly; the procedures below act on keys their callers pass in, except that
-- ff_mark_expired builds S(i):meta from the tag of the E:core key it is given (ff_key.stream).
--
-- Contents: ff_now, ff_ok, ff_err, ff_require_number, ff_hgetall, ff_fields, ff_hmget, ff_hset, ff_push,
-- ff_put_changed, ff_empty, ff_int_text, ff_tag_of, ff_key (key builders), ff_eligible_score,
-- ff_clamp_priority, ff_lane_of, ff_history, ff_close_stream_meta, ff_mark_expired (MARK-EXPIRED),
-- ff_validate_lease (LV), ff_clear_lease_fields, ff_publish_completion, ff_json.

-- Server clock in integer milliseconds (seconds * 1000 + floor(microseconds / 1000)).
local function ff_now()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- Success / error reply builders ({1, "OK", ...} / {0, code, ...}).
local function ff_ok(...)
  return {1, 'OK', ...}
end

local function ff_err(code, ...)
  return {0, code, ...}
end

-- Returns an invalid_input reply when `v` is not a number, else nil.
local function ff_require_number(v, name)
  if tonumber(v) == nil then
    return {0, 'invalid_input', name .. ' must be a number, got: ' .. tostring(v)}
  end
  return nil
end

-- HGETALL as a Lua table (missing key -> empty table).
local function ff_hgetall(key)
  local flat = redis.call('HGETALL', key)
  local t = {}
  for i = 1, #flat, 2 do
    t[flat[i]] = flat[i + 1]
  end
  return t
end

-- A constant field list read on a hot path (claims, completions): ff_hmget turns its replies into tables
-- with one constructor generated for the list (presized; inserting field by field rehashes the table
-- four times on the way to 16+ fields). Made on first use: `string` and `table` are not there at
-- FUNCTION LOAD. Field by field where loadstring is missing.
local function ff_fields(list)
  list.hot = true
  return list
end

local function ff_builder(fields)
  if not loadstring then return false end
  local parts = {}
  for i = 1, #fields do parts[i] = string.format('[%q] = v[%d] or nil', fields[i], i) end
  return loadstring('local v = ...; return {' .. table.concat(parts, ', ') .. '}') or false
end

-- HMGET `fields` of `key` as a table keyed by field name (absent fields stay nil). Returns nil when
-- the key does not exist: EXISTS is asked only when every field came back nil, so a hash that
-- exists without any of the fields still yields an (empty) table, like HGETALL-based checks.
local function ff_hmget(key, fields)
  local vals = redis.call('HMGET', key, unpack(fields))
  local build = fields.build
  if build == nil and fields.hot then
    build = ff_builder(fields)
    fields.build = build
  end
  local t
  if build then
    t = build(vals)
  else
    t = {}
    for i = 1, #fields do
      local v = vals[i]
      if v then t[fields[i]] = v end
    end
  end
  if next(t) == nil and redis.call('EXISTS', key) == 0 then return nil end
  return t
end

-- HSET every pair of `fields` in one call (no-op for an empty table).
local function ff_hset(key, fields)
  local argv = {}
  for k, v in pairs(fields) do
    argv[#argv + 1] = k
    argv[#argv + 1] = v
  end
  if #argv > 0 then
    redis.call('HSET', key, unpack(argv))
  end
end

-- Append every value given to the argument list `argv` (e.g. field/value pairs for an HSET).
local function ff_push(argv, ...)
  local n = #argv
  for i = 1, select('#', ...) do argv[n + i] = (select(i, ...)) end
end

-- Append field `f` = `v` to the HSET argument list `argv` unless the table `current` (what the caller
-- read) already holds exactly `v` there: the resulting hash is the same with fewer listpack updates.
local function ff_put_changed(argv, current, f, v)
  if current[f] ~= v then
    argv[#argv + 1] = f
    argv[#argv + 1] = v
  end
end

-- Missing and "" are the same to readers.
local function ff_empty(v)
  return v == nil or v == '' or v == false
end

-- A number as reply / field text: integral values as plain decimal (tostring switches to
-- exponent notation from 1e+15 up); fractions, inf and nan as tostring gives them.
local function ff_int_text(n)
  if n == math.floor(n) and n > -1e18 and n < 1e18 then
    return string.format('%d', n)
  end
  return tostring(n)
end

-- First `{...}` substring of a key: the hash tag runtime-built keys must reuse.
local function ff_tag_of(key)
  return string.match(key, '(%b{})')
end

-- Key builders for the keys a function builds at run time (contract §3; the same names as ffcore/keys.py
-- builds, which tests/ffcore/test_lua_keys.py checks for the same inputs). Nothing else in the library
-- formats a key. `tag` is always the hash tag of a KEYS[] key (ff_tag_of), so every built key lands in
-- the caller's slot; ids and lanes come from records already read or from ARGV. Optional last arguments
-- add one `:<part>` (dep:<edge>, caps:<csv>, out:<eid>, ...): no table per call on the claim paths.
local ff_key = {
  DAG_COMPLETIONS = 'ff:dag:completions',  -- Pub/Sub channel (contract §3.7)
}

-- E:<name>[:<id>] = ff:exec:<tag>:<eid>:<name>[:<id>]  (core, claim_grant, lease:current, dep:<edge>, ...)
function ff_key.exec(tag, eid, name, id)
  if id then return 'ff:exec:' .. tag .. ':' .. eid .. ':' .. name .. ':' .. id end
  return 'ff:exec:' .. tag .. ':' .. eid .. ':' .. name
end

-- A(i)[:<name>] = ff:attempt:<tag>:<eid>:<i>[:usage|:policy]
function ff_key.attempt(tag, eid, i, name)
  if name then return 'ff:attempt:' .. tag .. ':' .. eid .. ':' .. i .. ':' .. name end
  return 'ff:attempt:' .. tag .. ':' .. eid .. ':' .. i
end

-- S(i)[:<name>] = ff:stream:<tag>:<eid>:<i>[:meta]
function ff_key.stream(tag, eid, i, name)
  if name then return 'ff:stream:' .. tag .. ':' .. eid .. ':' .. i .. ':' .. name end
  return 'ff:stream:' .. tag .. ':' .. eid .. ':' .. i
end

-- L:<suffix>[:<id>] = ff:idx:<tag>:lane:<lane>:<suffix>[:<id>]  (eligible, blocked:budget, caps:<csv>, ...)
function ff_key.lane(tag, lane, suffix, id)
  if id then return 'ff:idx:' .. tag .. ':lane:' .. lane .. ':' .. suffix .. ':' .. id end
  return 'ff:idx:' .. tag .. ':lane:' .. lane .. ':' .. suffix
end

-- I:<name> = ff:idx:<tag>:<name>  (lease_expiry, attempt_timeout, ... of the partition)
function ff_key.index(tag, name)
  return 'ff:idx:' .. tag .. ':' .. name
end

-- I:worker:<wiid>:leases (an empty wiid gives ...:worker::leases, as upstream)
function ff_key.worker_leases(tag, wiid)
  return 'ff:idx:' .. tag .. ':worker:' .. wiid .. ':leases'
end

-- W(w)[:<name>] = ff:wp:<tag>:<waitpoint_id>[:condition|:signals]
function ff_key.waitpoint(tag, waitpoint_id, name)
  if name then return 'ff:wp:' .. tag .. ':' .. waitpoint_id .. ':' .. name end
  return 'ff:wp:' .. tag .. ':' .. waitpoint_id
end

-- F:<name>[:<id>] = ff:flow:<tag>:<flow_id>:<name>[:<id>]  (core, out:<eid>, edge:<edge_id>, ...)
function ff_key.flow(tag, flow_id, name, id)
  if id then return 'ff:flow:' .. tag .. ':' .. flow_id .. ':' .. name .. ':' .. id end
  return 'ff:flow:' .. tag .. ':' .. flow_id .. ':' .. name
end

-- Another key of the record whose `...:core` key the caller passed (E:policy from E:core, F:out:<eid>
-- from F:core): the trailing `core` replaced, as the contract derives E:policy (§3.1), so the result
-- keeps the caller's tag and id exactly.
function ff_key.of_core(core_key, name, id)
  if id then return string.sub(core_key, 1, -5) .. name .. ':' .. id end
  return string.sub(core_key, 1, -5) .. name
end

-- ff_create_fast's template hash (ours): ff:tmpl:<tag>:core:<template id>
function ff_key.core_template(tag, id)
  return 'ff:tmpl:' .. tag .. ':core:' .. id
end

-- Pub/Sub channel (ours, ffcore/wake.py): new eligible work on `lane`.
function ff_key.wake(lane)
  return 'ff:wake:' .. lane
end

-- Pub/Sub channel (ours, ffcore/wake.py): work for this one worker instance ("<lane> <partition>").
function ff_key.worker_wake(wiid)
  return 'ff:wake:worker:' .. wiid
end

-- Is `key` the NOOP placeholder (ff:noop:<tag>)? The contract's test is "contains ff:noop:" (§5.2).
function ff_key.is_noop(key)
  return string.find(key, 'ff:noop:', 1, true) ~= nil
end

-- Composite eligible score: lower is served first; priority dominates, then FIFO.
local function ff_eligible_score(priority, created_at)
  return 0 - (tonumber(priority) or 0) * 1000000000000 + (tonumber(created_at) or 0)
end

-- Priority (a number the caller already validated) clamped to 0..9000 and NOT floored: upstream
-- stores and scores a fractional priority as given ("2.5" stays "2.5" in create and
-- change_priority). NaN (tonumber accepts "nan") raises here, before the caller's first write;
-- upstream would write it and then raise on the ZADD score.
local function ff_clamp_priority(p)
  if p ~= p then error('priority must be a number, got: nan') end
  if p < 0 then return 0 end
  if p > 9000 then return 9000 end
  return p
end

-- The lane of a core record, for lane index keys built at run time: lane_id, then current_lane, then
-- "default" (contract §3.2).
local function ff_lane_of(core)
  local lane = core.lane_id
  if ff_empty(lane) then lane = core.current_lane end
  if ff_empty(lane) then lane = 'default' end
  return lane
end

-- XADD a lease-history event, trimmed MAXLEN ~ maxlen (default 1000).
local function ff_history(key, maxlen, event, fields)
  redis.call('XADD', key, 'MAXLEN', '~', maxlen or 1000, '*', 'event', event, unpack(fields))
end

-- Close an attempt stream's meta hash if it exists. With `only_open`, a meta already closed keeps
-- its first close reason (MARK-EXPIRED semantics).
local function ff_close_stream_meta(key, now, reason, only_open)
  if redis.call('EXISTS', key) == 0 then return end
  if only_open then
    local closed = redis.call('HGET', key, 'closed_at')
    if not ff_empty(closed) then return end
  end
  redis.call('HSET', key, 'closed_at', now, 'closed_reason', reason)
end

-- MARK-EXPIRED (contract §5.0): flag an active lease as expired and reclaimable. `core` is the
-- table already read from E:core; it is updated in place.
local function ff_mark_expired(core_key, history_key, core, now, maxlen)
  if core.ownership_state == 'lease_expired_reclaimable' then return end
  local fields = {
    lifecycle_phase = core.lifecycle_phase or '',
    ownership_state = 'lease_expired_reclaimable',
    eligibility_state = core.eligibility_state or '',
    blocking_reason = 'waiting_for_worker',
    blocking_detail = 'lease expired, awaiting reclaim',
    terminal_outcome = core.terminal_outcome or '',
    attempt_state = 'attempt_interrupted',
    public_state = 'active',
    lease_expired_at = now,
    last_mutation_at = now,
  }
  ff_hset(core_key, fields)
  for k, v in pairs(fields) do core[k] = v end
  ff_history(history_key, maxlen, 'expired', {
    'lease_id', core.current_lease_id or '',
    'lease_epoch', core.current_lease_epoch or '',
    'attempt_index', core.current_attempt_index or '',
    'attempt_id', core.current_attempt_id or '',
    'worker_id', core.current_worker_id or '',
    'worker_instance_id', core.current_worker_instance_id or '',
    'ts', now,
  })
  local idx = core.current_attempt_index
  if not ff_empty(idx) then
    ff_close_stream_meta(ff_key.stream(ff_tag_of(core_key), core.execution_id, idx, 'meta'),
      now, 'lease_expired', true)
  end
end

-- LV (contract §5.0): full lease validation for lease-holder calls. Returns an error reply or nil.
-- May MARK-EXPIRED as a side effect (the lease_expired error keeps that write).
local function ff_validate_lease(core_key, history_key, core, lease_id, lease_epoch, attempt_id, now, maxlen)
  if core.lifecycle_phase ~= 'active' then
    return {0, 'execution_not_active', core.terminal_outcome or '', core.current_lease_epoch or ''}
  end
  if core.ownership_state == 'lease_revoked' then
    return {0, 'lease_revoked'}
  end
  if (tonumber(core.lease_expires_at) or 0) <= now then
    ff_mark_expired(core_key, history_key, core, now, maxlen)
    return {0, 'lease_expired'}
  end
  if core.current_lease_id ~= lease_id or tostring(core.current_lease_epoch) ~= tostring(lease_epoch)
      or core.current_attempt_id ~= attempt_id then
    return {0, 'stale_lease'}
  end
  return nil
end

-- The six lease fields every release path clears on E:core.
local function ff_clear_lease_fields(fields)
  fields.current_lease_id = ''
  fields.current_worker_id = ''
  fields.current_worker_instance_id = ''
  fields.lease_expires_at = ''
  fields.lease_last_renewed_at = ''
  fields.lease_renewal_deadline = ''
  return fields
end

-- PUBLISH a DAG completion for flow members (channel ff:dag:completions, contract §3.7).
local function ff_publish_completion(core, outcome)
  if ff_empty(core.flow_id) then return end
  redis.call('PUBLISH', ff_key.DAG_COMPLETIONS, cjson.encode({
    execution_id = core.execution_id, flow_id = core.flow_id, outcome = outcome,
  }))
end

-- Decode JSON without raising; returns nil for undecodable text.
local function ff_json(text)
  if ff_empty(text) then return nil end
  local ok, v = pcall(cjson.decode, text)
  if not ok then return nil end
  return v
end

-- After usage was added to a budget (report_usage, record_spend): stamp the budget, remember the
-- idempotency key for a day, count a soft breach; the reply {1, OK} or {1, SOFT_BREACH, dim, value, limit}.
local function ff_usage_applied(def_key, dedup_key, now_ms, soft_dim, soft_value, soft_limit)
  redis.call('HSET', def_key, 'last_updated_at', now_ms)
  if not ff_empty(dedup_key) then
    redis.call('SET', dedup_key, '1', 'PX', 86400000)
  end
  if soft_dim then
    redis.call('HINCRBY', def_key, 'soft_breach_count', 1)
    return {1, 'SOFT_BREACH', soft_dim, ff_int_text(soft_value), soft_limit}
  end
  return {1, 'OK'}
end

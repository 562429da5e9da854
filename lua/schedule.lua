-- schedule.lua — recurring schedules (ours, NOT in the v0.2.0 contract; the 47 are unchanged).
--
-- A schedule lives on the flow/execution partition of its lane ({fp:N}), so the execution a fire makes
-- and the schedule's records share one slot: advancing the schedule and creating the execution are one
-- atomic call, on a cluster too. Fire times are computed by ffcore (cron via cronsim, zones via
-- zoneinfo); this file only checks them against the stored state (compare-and-set) and writes.
--
-- Keys touched (all passed in KEYS; S = ff:sched:{fp:N}:<schedule id>):
--   S                  HASH    definition and state (id, version, next_fire_at, paused, overlap, last_eid, ...)
--   S:runs             ZSET    "<fire_at>|<outcome>|<eid or count>" scored by fire time (the last 500 kept)
--   I:schedules_due    ZSET    ff:idx:{fp:N}:schedules_due, schedule id -> next_fire_at (active ones only)
--   E:core of the previous fire (read only: its lifecycle_phase, for overlap "skip")
--   I:created          ZSET    our listing index of executions (ZADD created_at eid, as ff_create_fast)
--   the 8 KEYS of ff_create_execution for the new execution (the contract's create writes them)
--
-- ff_schedule_fire (KEYS 13 / ARGV 7 + 13; "advance" needs KEYS[1..3] and ARGV[1..7] only)
--   KEYS[1] S  [2] I:schedules_due  [3] S:runs  [4] E:core of the previous fire (ff:noop:<tag> if none)
--   KEYS[5] I:created  [6..13] ff_create_execution's KEYS[1..8]
--   ARGV[1] mode: "tick" (a due fire), "trigger" (an operator's fire now), "advance" (drop missed fires)
--   ARGV[2] expected version  [3] expected next_fire_at (tick/advance)  [4] fire_at (ms)
--   ARGV[5] the new next_fire_at ("" = no more fires; tick/advance)
--   ARGV[6] missed: how many fire times before fire_at were dropped (catch-up limit / skip)
--   ARGV[7] expected previous eid ("" = none)  [8..20] ff_create_execution's ARGV[1..13]
--   Checks, before any write: the schedule exists ({1, "GONE"}), its version, last_eid and (tick,
--   advance) next_fire_at are the expected ones and it is not paused ({1, "STALE"} / {1, "PAUSED"}):
--   a second scanner, a restart or an edit in between never fires the same time twice.
--   Effects: tick with overlap "skip" and a previous execution not terminal records "skipped";
--   otherwise tick/trigger create the execution exactly as ff_create_execution (its idempotency key,
--   built by ffcore from schedule id + fire time, is in KEYS[11]); a create error is returned as is,
--   with nothing written. Then: last_eid / last_fire_at / fires (or skipped, missed) on S; tick/advance
--   move next_fire_at and the I:schedules_due entry; S:runs gets the outcome (and the dropped count).
--   Reply {1, "FIRED" | "TRIGGERED" | "SKIPPED" | "ADVANCED", eid ("" when none), public_state,
--   previous eid}.
--
-- ff_schedule_put (KEYS 2 / ARGV 2 + 2n)
--   KEYS[1] S  [2] I:schedules_due
--   ARGV[1] "new" (create: refused with {0, "schedule_exists"} when S exists) or the expected version
--   (update: {0, "schedule_not_found"} / {0, "schedule_conflict", version} otherwise)
--   ARGV[2] next_fire_at: a number, "" (none) or "keep"  ARGV[3..] field, value pairs written to S
--   Effects: HSET the pairs, version + 1, next_fire_at; the due entry follows (removed while paused).
--   Reply {1, "OK", version}.
--
-- ff_schedule_delete (KEYS 3 / ARGV 0)
--   KEYS[1] S  [2] I:schedules_due  [3] S:runs
--   Reply {1, "OK", id} | {0, "schedule_not_found"}

do
  local RUNS_KEPT = 500
  local FIRE_FIELDS = {'id', 'version', 'next_fire_at', 'paused', 'overlap', 'last_eid'}

  local function hset_core(core_key, pairs)
    redis.call('HSET', core_key, unpack(pairs))
  end

  -- Keep I:schedules_due in step with S: an entry only while active with a next fire time.
  local function sync_due(sched_key, due_key)
    local s = ff_hmget(sched_key, {'id', 'paused', 'next_fire_at'})
    if not s or not s.id then return end
    if s.paused == '1' or ff_empty(s.next_fire_at) then
      redis.call('ZREM', due_key, s.id)
    else
      redis.call('ZADD', due_key, s.next_fire_at, s.id)
    end
  end

  local function record(runs_key, score, member)
    redis.call('ZADD', runs_key, score, member)
    redis.call('ZREMRANGEBYRANK', runs_key, 0, -(RUNS_KEPT + 1))
  end

  redis.register_function('ff_schedule_fire', function(keys, args)
    local sched_key, due_key, runs_key, prev_core_key, created_key = keys[1], keys[2], keys[3], keys[4], keys[5]
    local mode, expected_version, expected_next = args[1], args[2], args[3]
    local fire_at, new_next, missed, expected_prev = args[4], args[5] or '', tonumber(args[6]) or 0, args[7] or ''
    if mode ~= 'tick' and mode ~= 'trigger' and mode ~= 'advance' then
      return ff_err('invalid_input', 'mode must be tick, trigger or advance')
    end
    local bad = ff_require_number(fire_at, 'fire_at')
    if bad then return bad end
    local tag = ff_tag_of(sched_key)
    for i = 2, (mode == 'advance') and 3 or 13 do
      if ff_tag_of(keys[i]) ~= tag then return ff_err('invalid_input', 'KEYS[' .. i .. '] must share the tag of KEYS[1]') end
    end

    local s = ff_hmget(sched_key, FIRE_FIELDS)
    if not s then return {1, 'GONE', '', '', ''} end
    if s.version ~= expected_version or (s.last_eid or '') ~= expected_prev then return {1, 'STALE', '', '', ''} end
    if mode ~= 'trigger' then
      if s.paused == '1' then return {1, 'PAUSED', '', '', ''} end
      if (s.next_fire_at or '') ~= expected_next then return {1, 'STALE', '', '', ''} end
    end

    local outcome, eid, public = 'fired', '', ''
    if mode == 'advance' then
      outcome = 'missed'
    elseif mode == 'trigger' then
      outcome = 'triggered'
    elseif s.overlap == 'skip' and expected_prev ~= '' then
      local phase = redis.call('HGET', prev_core_key, 'lifecycle_phase')
      if phase and phase ~= 'terminal' then outcome = 'skipped' end
    end

    if outcome == 'fired' or outcome == 'triggered' then
      local ckeys, cargs = {}, {}
      for i = 6, 13 do ckeys[#ckeys + 1] = keys[i] end
      for i = 8, 20 do cargs[#cargs + 1] = args[i] end
      local reply = ff_create(ckeys, cargs, hset_core)
      if reply[1] ~= 1 then return reply end
      eid = reply[3]
      if reply[2] == 'OK' then
        public = reply[4]
        local created_at = redis.call('HGET', ckeys[1], 'created_at')
        if created_at then redis.call('ZADD', created_key, created_at, eid) end
      else
        -- DUPLICATE: this fire time's execution exists already (its idempotency key); never a second one.
        public = ''
      end
    end

    local now = ff_now()
    local fields = {'last_run_at', ff_int_text(now)}
    if eid ~= '' then
      ff_push(fields, 'last_eid', eid, 'last_fire_at', fire_at)
      redis.call('HINCRBY', sched_key, 'fires', 1)
    elseif outcome == 'skipped' then
      redis.call('HINCRBY', sched_key, 'skipped', 1)
    end
    if missed > 0 then
      redis.call('HINCRBY', sched_key, 'missed', missed)
      record(runs_key, expected_next, expected_next .. '|missed|' .. ff_int_text(missed))
    end
    if mode ~= 'trigger' then ff_push(fields, 'next_fire_at', new_next) end
    redis.call('HSET', sched_key, unpack(fields))
    if mode ~= 'trigger' then sync_due(sched_key, due_key) end
    if outcome ~= 'missed' then record(runs_key, fire_at, fire_at .. '|' .. outcome .. '|' .. eid) end

    local status = {fired = 'FIRED', triggered = 'TRIGGERED', skipped = 'SKIPPED', missed = 'ADVANCED'}
    return {1, status[outcome], eid, public, expected_prev}
  end)

  redis.register_function('ff_schedule_put', function(keys, args)
    local sched_key, due_key = keys[1], keys[2]
    if ff_tag_of(due_key) ~= ff_tag_of(sched_key) then
      return ff_err('invalid_input', 'KEYS[2] must share the tag of KEYS[1]')
    end
    local expect, next_fire = args[1], args[2]
    if #args % 2 ~= 0 then return ff_err('invalid_input', 'field/value pairs must come in pairs') end
    if next_fire ~= '' and next_fire ~= 'keep' then
      local bad = ff_require_number(next_fire, 'next_fire_at')
      if bad then return bad end
    end
    local version = redis.call('HGET', sched_key, 'version')
    if expect == 'new' then
      if redis.call('EXISTS', sched_key) == 1 then return ff_err('schedule_exists') end
      version = 0
    else
      if not version then return ff_err('schedule_not_found') end
      if version ~= expect then return ff_err('schedule_conflict', version) end
    end
    local fields = {}
    for i = 3, #args do fields[#fields + 1] = args[i] end
    ff_push(fields, 'version', ff_int_text(tonumber(version) + 1))
    if next_fire ~= 'keep' then ff_push(fields, 'next_fire_at', next_fire) end
    redis.call('HSET', sched_key, unpack(fields))
    sync_due(sched_key, due_key)
    return {1, 'OK', ff_int_text(tonumber(version) + 1)}
  end)

  redis.register_function('ff_schedule_delete', function(keys, args)
    local sched_key, due_key, runs_key = keys[1], keys[2], keys[3]
    if ff_tag_of(due_key) ~= ff_tag_of(sched_key) or ff_tag_of(runs_key) ~= ff_tag_of(sched_key) then
      return ff_err('invalid_input', 'KEYS must share the tag of KEYS[1]')
    end
    local id = redis.call('HGET', sched_key, 'id')
    if not id then return ff_err('schedule_not_found') end
    redis.call('ZREM', due_key, id)
    redis.call('DEL', sched_key, runs_key)
    return {1, 'OK', id}
  end)
end

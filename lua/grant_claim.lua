-- grant_claim.lua — ours (NOT one of the 47 contract functions): upstream v0.13's ff_issue_grant_and_claim,
-- an atomic "take this execution now" (operations §4.7). It comes after signal.lua in ORDER because it
-- shares both claim bodies: ff_fresh_claim_writes (execution.lua) and ff_resumed_claim_writes (signal.lua),
-- so its writes are ff_issue_claim_grant + ff_claim_execution's (or + ff_claim_resumed_execution's) by
-- construction. The grant is written and consumed in the same call, so, as after the contract pair, no
-- grant hash remains: it is not written at all.
--
-- Keys touched (E: = ff:exec:<tag>:<eid>:, I: = ff:idx:<tag>:, L: = I:lane:<lane>:):
--   E:core E:claim_grant (read) L:eligible I:lease_expiry I:worker:<wiid>:leases E:attempts
--   E:lease:current E:lease:history L:active I:attempt_timeout I:execution_deadline; runtime-built from
--   the tag of KEYS[1]: A(i), A(i):usage, A(i):policy (fresh) or A(current) (resumed), as the claims do.
--
-- ff_issue_grant_and_claim (11 KEYS / 11 ARGV, upstream's order)
--   KEYS[1] E:core  [2] E:claim_grant  [3] L:eligible  [4] I:lease_expiry  [5] I:worker:<wiid>:leases
--   KEYS[6] E:attempts  [7] E:lease:current  [8] E:lease:history  [9] L:active  [10] I:attempt_timeout
--   KEYS[11] I:execution_deadline
--   ARGV[1] execution_id  [2] worker_id  [3] worker_instance_id  [4] lane  [5] capability_hash (unused)
--   ARGV[6] lease_id  [7] lease_ttl_ms (also the grant's TTL)  [8] attempt_id (fresh claims)
--   ARGV[9] attempt_policy_json ("" = none)  [10] attempt_timeout_ms (""/"0" = none; for a resumed attempt:
--   the remaining attempt timeout)  [11] execution_deadline_at (""/"0" = none; fresh claims)
--   Reply {1, "OK", lease_id, lease_epoch, attempt_index}.
--   Refusals, before any write: invalid_input (ttl, policy JSON, timeout, deadline), execution_not_found,
--   execution_not_eligible (not runnable, terminal outcome set, or not eligible_now), lease_conflict
--   (owned), active_attempt_exists, grant_already_exists, execution_not_in_eligible_set.
--   No capability check (an operator's take). Renewal deadline ⌊2·ttl/3⌋ from now.
--   Stricter than upstream (docs/deviations.md): an attempt_interrupted execution must be eligible_now and in
--   L:eligible too, as the grant of the contract pair requires, so a delayed or blocked one is never leased
--   out of its lane set.

do
  local FIELDS = {
    'execution_id', 'lifecycle_phase', 'ownership_state', 'eligibility_state', 'terminal_outcome',
    'attempt_state', 'total_attempt_count', 'current_lease_epoch', 'started_at', 'current_attempt_id',
    'current_attempt_index', 'pending_retry_reason', 'pending_replay_reason', 'pending_replay_requested_by',
    'pending_previous_attempt_index',
  }

  -- "" and "0" mean none; anything else must be a number. Returns value-or-nil, or nil plus an error reply.
  local function optional_number(raw, name)
    if raw == nil or raw == '' or raw == '0' then return nil end
    local n = tonumber(raw)
    if n == nil then return nil, ff_err('invalid_input', name .. ' must be a number, got: ' .. raw) end
    return n
  end

  redis.register_function('ff_issue_grant_and_claim', function(keys, args)
    local core_key, grant_key, eligible_key, lease_expiry_key = keys[1], keys[2], keys[3], keys[4]
    local worker_leases_key, attempts_key, lease_key, history_key = keys[5], keys[6], keys[7], keys[8]
    local active_key, attempt_timeout_key, deadline_key = keys[9], keys[10], keys[11]
    local worker_id, wiid, lane = args[2] or '', args[3] or '', args[4] or ''
    local lease_id, ttl_raw, attempt_id = args[6] or '', args[7], args[8] or ''
    local policy_json, timeout_raw, deadline_raw = args[9] or '', args[10], args[11]

    local bad = ff_require_number(ttl_raw, 'lease_ttl_ms')
    if bad then return bad end
    local ttl = math.floor(tonumber(ttl_raw))
    if ttl < 1 then return ff_err('invalid_input', 'lease_ttl_ms must be at least 1') end
    if lease_id == '' then return ff_err('invalid_input', 'lease_id must not be empty') end
    local timeout_ms, deadline, err
    timeout_ms, err = optional_number(timeout_raw, 'attempt_timeout_ms')
    if err then return err end
    deadline, err = optional_number(deadline_raw, 'execution_deadline_at')
    if err then return err end
    local policy = nil
    if policy_json ~= '' then
      local ok, decoded = pcall(cjson.decode, policy_json)
      if not ok or type(decoded) ~= 'table' then
        return ff_err('invalid_input', 'attempt_policy_json must be a JSON object')
      end
      policy = decoded
    end

    local core = ff_hmget(core_key, FIELDS)
    if not core then return ff_err('execution_not_found') end
    if core.lifecycle_phase ~= 'runnable' then return ff_err('execution_not_eligible') end
    if core.ownership_state ~= 'unowned' then return ff_err('lease_conflict') end
    if core.terminal_outcome ~= 'none' then return ff_err('execution_not_eligible') end
    if core.attempt_state == 'running_attempt' then return ff_err('active_attempt_exists') end
    if redis.call('EXISTS', grant_key) == 1 then return ff_err('grant_already_exists') end
    if core.eligibility_state ~= 'eligible_now' then return ff_err('execution_not_eligible') end
    local eid = core.execution_id or args[1]
    if not redis.call('ZSCORE', eligible_key, eid) then return ff_err('execution_not_in_eligible_set') end

    local now = ff_now()
    local tag = ff_tag_of(core_key)
    if core.attempt_state == 'attempt_interrupted' then
      local epoch, _, _, attempt_index = ff_resumed_claim_writes({
        core = core_key, grant = grant_key, attempt = ff_key.attempt(tag, eid, core.current_attempt_index or '0'),
        lease = lease_key, history = history_key, eligible = eligible_key, lease_expiry = lease_expiry_key,
        worker_leases = worker_leases_key, active = active_key, attempt_timeout = attempt_timeout_key,
      }, core, {
        eid = eid, worker_id = worker_id, wiid = wiid, lane = lane, lease_id = lease_id, now = now, ttl = ttl,
        remaining = timeout_ms, no_grant = true,
      })
      return ff_ok(lease_id, ff_int_text(epoch), attempt_index)
    end

    if attempt_id == '' then return ff_err('invalid_input', 'attempt_id must not be empty') end
    local epoch, _, i = ff_fresh_claim_writes({
      core = core_key, grant = grant_key, eligible = eligible_key, lease_expiry = lease_expiry_key,
      worker_leases = worker_leases_key, attempts = attempts_key, lease = lease_key, history = history_key,
      active = active_key, attempt_timeout = attempt_timeout_key, deadline = deadline_key, tag = tag,
    }, core, {
      eid = eid, worker_id = worker_id, wiid = wiid, lane = lane, lease_id = lease_id, attempt_id = attempt_id,
      now = now, ttl = ttl, renew = math.floor(ttl * 2 / 3), timeout_ms = timeout_ms,
      deadline = deadline and ff_int_text(deadline) or nil, policy = policy, no_grant = true,
    })
    return ff_ok(lease_id, ff_int_text(epoch), ff_int_text(i))
  end)
end

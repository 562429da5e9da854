-- fastpath.lua — our own fast-path functions (NOT in the v0.2.0 contract; the 47 are unchanged).
--
-- The contract needs four FCALLs per task (create, issue grant, claim, complete) plus the worker's
-- probe and pre-read round trips. These functions do the same writes with fewer calls: one call
-- picks and claims up to N eligible executions of one lane of one partition, and one call completes
-- a task and claims the next. For every execution they claim, the keys left behind are exactly
-- those of ff_issue_claim_grant + ff_claim_execution (attempt_policy_json "{}", attempt timeout from
-- the stored policy, no deadline) or of ff_issue_claim_grant + ff_claim_resumed_execution (no
-- remaining attempt timeout) — the grant hash is written and consumed in the same call, so it never
-- exists afterwards. Candidates these functions cannot claim with the same effects are returned
-- untouched ("slow" list) for the caller's contract path: budget/quota attachments (admission runs
-- in Python first) and capability mismatches or malformed capability lists (the grant's error with
-- its stamp, then the route block). Candidates nobody may claim right now (not eligible, lease
-- held, a grant of another worker_id or an expired one outstanding) are skipped, exactly where
-- issue-grant/claim would refuse them; a live grant of the same worker_id (a replica's) is consumed,
-- as the contract's claim consumes it.
--
-- Keys touched (E: = ff:exec:<tag>:<eid>:, I: = ff:idx:<tag>:, L: = I:lane:<lane>:):
--   KEYS: L:eligible I:lease_expiry I:worker:<wiid>:leases L:active I:attempt_timeout
--   I:execution_deadline (+ for complete: E:core A(cur) L:terminal E:lease:current E:lease:history
--   S(cur):meta E:result). Runtime-built from the tag of KEYS[1] + eids read from L:eligible:
--   E:core E:claim_grant E:policy E:payload E:tags E:attempts E:lease:current E:lease:history
--   A(i) A(i):usage (the same per-execution keys the contract builds for claims).
--
-- ff_claim_next (6 KEYS / 7 + 2N ARGV)
--   KEYS[1] L:eligible  [2] I:lease_expiry  [3] I:worker:<wiid>:leases  [4] L:active
--   KEYS[5] I:attempt_timeout  [6] I:execution_deadline (not written: no deadline is passed)
--   ARGV[1] worker_id  [2] worker_instance_id  [3] lane  [4] worker capabilities CSV ("" = none)
--   ARGV[5] lease_ttl_ms  [6] renew_before_ms  [7] max_claims N (1..64)
--   ARGV[8 + 2j], ARGV[9 + 2j] lease_id, attempt_id for the j-th claim (j = 0..N-1)
--   Reply {1, "OK", claimed, slow}; claimed = list of {eid, lease_id, epoch, expires_at, attempt_id,
--   attempt_index, attempt_type, execution_kind, payload, policy_json, {tag, value, ...}}; slow =
--   list of eids for the contract path. {0, "invalid_input", detail} before any read on bad ARGV.
-- ff_claim_capable (7 KEYS / as ff_claim_next)
--   KEYS[1..6] as ff_claim_next; KEYS[7] L:caps:<csv> (ours: eligible executions requiring exactly the
--   sorted capability list csv, written by ffcore at create and at route unblock). Heads come from
--   KEYS[7] instead of L:eligible; entries no longer in L:eligible are dropped (but kept while their E:core
--   does not exist yet: ffcore writes the entry just ahead of the create). Every claim (here or in
--   the other two functions) removes the execution from its capability index, and ff_claim_next leaves
--   an indexed execution whose capabilities the worker lacks untouched (no "slow", no route block).
--   Same reply as ff_claim_next.
-- ff_complete_and_claim_next (18 KEYS / 5 + 7 + 2N ARGV)
--   KEYS[1..12] and ARGV[1..5] exactly as ff_complete_execution; KEYS[13..18] and ARGV[6..] as
--   ff_claim_next's KEYS[1..6] and ARGV[1..]. The completion behaves as ff_complete_execution (same
--   writes, same error replies — on an error nothing is claimed). A flow member's outgoing edges are
--   then satisfied as ff_resolve_dependency(success) would (runtime-built keys of the same tag:
--   F:core F:out:<eid> F:edge:<e> F:edgegroup:<child>, the child's E:core E:deps:meta E:deps:unresolved E:dep:<e>
--   E:payload and its lane's L:eligible L:blocked:dependencies); then up to N are claimed, and
--   children made eligible but not claimed are announced on ff:wake:<lane> (ours, ffcore.wake).
--   Optional KEYS[19] L:caps:<csv>: claim from that capability index instead (as ff_claim_capable).
--   Reply {1, "OK", "completed", claimed, slow}.
-- ff_create_fast (KEYS and ARGV as ff_create_execution's; same checks, writes and replies) [+ KEYS[9] I:created,
--   KEYS[10..] more listing indexes of ours (per kind / per tag: ZADD created_at eid as KEYS[9], same tag),
--   ARGV[14] wake mode, ARGV[15..16] lease_id, attempt_id for a hand-off] — optionally, for a create made
--   (not a duplicate): ZADD KEYS[9] (our newest-first listing index, same tag as KEYS[1]) created_at eid,
--   and, when ARGV[14] is "1" and the execution is eligible now, the wake: one idle worker of the lane
--   (wake_one: ZPOPMIN of our L:idle, PUBLISH on its ff:wake:worker:<wiid>; nobody idle or listening there:
--   the hint on ff:wake:<lane> to all). Work that needs capabilities wakes one worker idle on that exact
--   list's idle set instead (L:idle:caps:<csv>; nobody there: the lane's hint "<partition> <csv>"); mode "2" (a batch's
--   creates before the lane's last) does only that, with no hint when nobody is idle. A worker that takes
--   hand-offs (its idle member carries its lease parameters), listens and holds fewer leases on the
--   partition than its slots is instead handed the head of the lane (of the capability index): claimed for
--   it here, with the ids of ARGV[15..16], exactly as its own ff_claim_next (ff_claim_capable) of one would,
--   and published to it (hand_off); when that head is the execution this call created, its core, policy,
--   payload and (absent) tags are taken from what the create wrote instead of being read back. The caller's side writes of a plain create ride in the same call (server
--   clock). Claims (all three claim functions) of a worker that passes the optional ARGV "1" (or "2": it
--   takes hand-offs) after its id pairs keep its entry in the idle set of their source — L:idle for the
--   lane's eligible set, L:idle:caps:<csv> for the capability index L:caps:<csv> — (ZADD server ms when the
--   claim left it a free slot, ZREM when it came back full).
--   The new E:core is not built field by field (54 listpack inserts, each a search and a realloc):
--   it is COPYed from a template hash of the constant fields — ff:tmpl:<tag>:core:<id>, one per
--   partition (ours, created on first use; <id> is a checksum of the template's fields and values,
--   so a library with other fields never copies an old one) — and only the fields whose value differs
--   from the template's are then written. The resulting hash holds the same fields, values and order.
-- ff_complete_batch_and_claim (6 [+1] + 12C KEYS / 3 + 5C + 7 + 2N ARGV) — a worker's group commit
--   ARGV[1] C completions (1..64)  ARGV[2] "1" when KEYS[7] is a capability index L:caps:<csv>, else "0"
--   ARGV[3] C characters: "1" where completion j wants a successor, else "0" (N = its count of "1")
--   KEYS[1..6] (+ KEYS[7]) as ff_claim_next's (ff_claim_capable's); then 12 KEYS per completion j, in
--   ff_complete_execution's order; ARGV[4 + 5(j-1) .. 8 + 5(j-1)] its 5 ARGV; then ff_claim_next's ARGV.
--   Every KEY must share the hash tag of KEYS[1] (one partition; refused before any write otherwise).
--   Each completion behaves exactly as its own ff_complete_execution (and, for a flow member, as
--   ff_complete_and_claim_next resolves its outgoing edges); one refused completion does not stop the
--   others. Then one successor is claimed per completion that wanted one AND completed (a refused one
--   claims nothing, as in ff_complete_and_claim_next), with the first (lease_id, attempt_id) pairs.
--   Reply {1, "OK", outcomes, claimed, slow}: outcomes[j] is "completed" or the error reply
--   ff_complete_execution would have given ({0, code, ...}).
-- ff_deliver_signal_fast (12 KEYS / 18 ARGV) — a signal in one round trip
--   KEYS[1..9] and ARGV exactly as ff_deliver_signal's; KEYS[10] I:suspension_timeout, KEYS[11] SEC,
--   KEYS[12] the partition's signal-delivery stream (ff_deliver_signal's 15th key).
--   ff_deliver_signal also takes L:eligible, L:suspended and L:delayed, so its caller must first read
--   the execution's lane; here they are built from the tag of KEYS[1] and E:core's lane (lane_id, else
--   current_lane, else "default"), read only when the signal resumes the execution. Checks, writes and
--   replies are ff_deliver_signal's (one shared body, signal.lua's ff_deliver). An execution the
--   signal made eligible at once (no resume delay) is announced on ff:wake:<lane>, so an idle worker
--   claims it without waiting for its next poll.

do
  local MAX_CLAIMS = 64
  -- Eligible members examined per claimed slot: skipped/slow heads must not starve the batch.
  local SCAN_PER_CLAIM, SCAN_EXTRA = 2, 16

  local PICK_FIELDS = ff_fields({
    'execution_id', 'lifecycle_phase', 'ownership_state', 'eligibility_state', 'terminal_outcome',
    'attempt_state', 'total_attempt_count', 'current_lease_epoch', 'started_at',
    'pending_retry_reason', 'pending_replay_reason', 'pending_replay_requested_by',
    'pending_previous_attempt_index', 'current_attempt_index', 'current_attempt_id',
    'execution_kind', 'required_capabilities', 'budget_ids', 'quota_policy_id',
  })

  -- Where each PICK_FIELDS value sits in a create's core pairs (ff_create_core_pairs: one fixed layout), so
  -- a create that hands its own execution over claims it without reading back what it just wrote.
  local PICK_AT = {}
  do
    local layout = ff_create_core_pairs({eid = '', namespace = '', lane_id = '', kind = '', partition_id = '',
      priority = '', creator = '', eligibility = '', blocking = '', detail = '', public = '', now = '', delay_until = ''})
    for i = 1, #layout, 2 do PICK_AT[layout[i]] = i + 1 end
  end

  -- The PICK_FIELDS of an execution created in this call (its core pairs; no capabilities, budget or quota
  -- fields: a create that has them does not pass `fresh`), as ff_hmget would read them.
  local function fresh_core(pairs)
    local t = {}
    for _, f in ipairs(PICK_FIELDS) do
      local at = PICK_AT[f]
      if at then t[f] = pairs[at] end
    end
    return t
  end

  -- ARGV of a claim batch starting at `o` (1 for ff_claim_next); an error reply or the table.
  local function claim_args(args, o)
    local c = {
      worker_id = args[o] or '', wiid = args[o + 1] or '', lane = args[o + 2] or '',
      caps = args[o + 3] or '', ttl = tonumber(args[o + 4]), renew = tonumber(args[o + 5]),
      n = tonumber(args[o + 6]), args = args, ids_at = o + 7,
    }
    if not c.ttl or c.ttl <= 0 then return ff_err('invalid_input', 'lease_ttl_ms must be a positive number') end
    if not c.renew then return ff_err('invalid_input', 'renew_before_ms must be a number') end
    if not c.n or c.n ~= math.floor(c.n) or c.n < 0 or c.n > MAX_CLAIMS then
      return ff_err('invalid_input', 'max_claims must be an integer 0..' .. MAX_CLAIMS)
    end
    for j = 0, c.n - 1 do
      local lid, aid = args[o + 7 + 2 * j], args[o + 8 + 2 * j]
      if ff_empty(lid) or ff_empty(aid) then
        return ff_err('invalid_input', 'a lease_id and an attempt_id are needed per claim')
      end
    end
    local have = {}
    for tok in string.gmatch(c.caps, '[^,]+') do have[tok] = true end
    c.have = have
    -- Optional ARGV after the id pairs: "1" = this worker listens for wakes of its own (ff:wake:worker:<wiid>),
    -- so a claim that leaves it with a free slot puts it on the lane's idle set (wake_one); "2" and its handler
    -- slots = it also takes hand-offs, and its member there carries its claim parameters (parse_member).
    local at = o + 7 + 2 * c.n
    local flag, slots = args[at], tonumber(args[at + 1])
    c.idle = flag == '1' or flag == '2'
    c.member = c.wiid
    if flag == '2' then
      if not slots or slots < 1 or slots ~= math.floor(slots) then
        return ff_err('invalid_input', 'a worker taking hand-offs passes its slots, a positive integer')
      end
      c.member = table.concat({c.wiid, args[o + 4], args[o + 5], args[at + 1], c.worker_id}, '\t')
    end
    return nil, c
  end

  -- Does the worker hold every required capability (issue_grant's check, same bounds)?
  local function caps_ok(required, have)
    if ff_empty(required) then return true end
    if #required > 4096 then return false end
    local count = 0
    for tok in string.gmatch(required, '[^,]+') do
      count = count + 1
      if count > 256 or not have[tok] then return false end
    end
    return true
  end

  -- The stored policy decides two things: attachment (-> slow) and the attempt timeout the Python
  -- claimer passes (timeout_policy.attempt_timeout_ms, a positive integer). Returns attached, timeout.
  local function policy_facts(policy_json)
    if ff_empty(policy_json) or policy_json == '{}' then return false, nil end
    local p = ff_json(policy_json)
    if type(p) ~= 'table' then return false, nil end
    local b, q = p.budget_ids, p.quota_policy_id
    if (type(b) == 'table' and next(b) ~= nil) or (type(b) == 'string' and b ~= '') then return true, nil end
    if q ~= nil and q ~= cjson.null and q ~= '' and q ~= false then return true, nil end
    local tp, t = p.timeout_policy, nil
    if type(tp) == 'table' then
      local v = tp.attempt_timeout_ms
      if type(v) == 'number' and v > 0 and v == math.floor(v) then t = v end
    end
    return false, t
  end

  -- ff_claim_execution's writes (attempt_policy_json "{}", no deadline), via the shared ff_fresh_claim_writes.
  -- `w` holds its two argument tables, made once per batch (c.writes) and refilled per claim: tables
  -- built per claim cost more server time than the writes' own arguments.
  local function fresh_claim(k, eid, core_key, grant_key, core, c, lid, aid, now, timeout_ms, no_grant)
    local w = c.writes
    if not w then
      w = {
        keys = {eligible = k.eligible, lease_expiry = k.lease_expiry, worker_leases = k.worker_leases,
          active = k.active, attempt_timeout = k.attempt_timeout, tag = k.tag},
        claim = {worker_id = c.worker_id, wiid = c.wiid, lane = c.lane, ttl = c.ttl, renew = c.renew},
      }
      c.writes = w
    end
    local wk, wa = w.keys, w.claim
    wk.core, wk.grant, wk.attempts = core_key, grant_key, ff_key.exec(k.tag, eid, 'attempts')
    wk.lease, wk.history = ff_key.exec(k.tag, eid, 'lease:current'), ff_key.exec(k.tag, eid, 'lease:history')
    wa.eid, wa.lease_id, wa.attempt_id, wa.now, wa.timeout_ms, wa.no_grant = eid, lid, aid, now, timeout_ms, no_grant
    local epoch, expires, i, attempt_type = ff_fresh_claim_writes(wk, core, wa)
    return {lid, ff_int_text(epoch), ff_int_text(expires), aid, ff_int_text(i), attempt_type}
  end

  -- ff_claim_resumed_execution's writes (no remaining attempt timeout: same attempt, epoch + 1), via the
  -- shared ff_resumed_claim_writes (signal.lua); its argument tables are made once per batch, as above.
  local function resumed_claim(k, eid, core_key, grant_key, core, c, lid, now, no_grant)
    local w = c.resumed
    if not w then
      w = {
        keys = {eligible = k.eligible, lease_expiry = k.lease_expiry, worker_leases = k.worker_leases,
          active = k.active},
        claim = {worker_id = c.worker_id, wiid = c.wiid, lane = c.lane, ttl = math.floor(c.ttl)},
      }
      c.resumed = w
    end
    local wk, wa = w.keys, w.claim
    wk.core, wk.grant = core_key, grant_key
    wk.attempt = ff_key.attempt(k.tag, eid, core.current_attempt_index or '')
    wk.lease, wk.history = ff_key.exec(k.tag, eid, 'lease:current'), ff_key.exec(k.tag, eid, 'lease:history')
    wa.eid, wa.lease_id, wa.now, wa.no_grant = eid, lid, now, no_grant
    local epoch, expires, aid, idx = ff_resumed_claim_writes(wk, core, wa)
    return {lid, ff_int_text(epoch), ff_int_text(expires), aid, idx, 'resumed'}
  end

  -- Pick and claim up to c.n heads of k.eligible — or of k.capable, a capability index whose
  -- entries are hints (stale ones, no longer in L:eligible, are dropped) — at server time `now` (read
  -- here when nil). Returns claimed, slow.
  local function pick_and_claim(k, c, now)
    local claimed, slow = {}, {}
    if c.n == 0 then return claimed, slow, now end
    local source = k.capable or k.eligible
    local heads = redis.call('ZRANGE', source, 0, c.n * SCAN_PER_CLAIM + SCAN_EXTRA - 1)
    if #heads == 0 then return claimed, slow, now end
    now = now or ff_now()
    for _, eid in ipairs(heads) do
      if #claimed >= c.n then break end
      local core_key, grant_key = ff_key.exec(k.tag, eid, 'core'), nil
      local core = nil
      local fresh = c.fresh and c.fresh.eid == eid and c.fresh or nil  -- created by this very call
      if fresh then
        core = fresh_core(fresh.pairs)
      elseif k.capable and not redis.call('ZSCORE', k.eligible, eid) then
        -- Stale (claimed, cancelled, blocked...) unless its create is still on its way: the index
        -- entry is written just ahead of the create (ffcore/execution/client.py).
        if redis.call('EXISTS', core_key) == 1 then redis.call('ZREM', k.capable, eid) end
      else
        core = ff_hmget(core_key, PICK_FIELDS)
      end
      -- issue-grant's refusals (not found, not eligible): skip. An outstanding grant is skipped too,
      -- unless the contract's claim would consume it: same worker_id (a replica of this worker), not
      -- expired.
      local grant_ok, no_grant = false, false
      if core and core.lifecycle_phase == 'runnable' and core.eligibility_state == 'eligible_now' then
        grant_key = ff_key.exec(k.tag, eid, 'claim_grant')
        local g = redis.call('HMGET', grant_key, 'worker_id', 'grant_expires_at')
        local g_exp = tonumber(g[2])
        no_grant = not g[1] and not g[2]
        grant_ok = not g[1] or (g[1] == c.worker_id and not (g_exp and g_exp < now))
      end
      if grant_ok then
        local policy_json = fresh and fresh.policy or redis.call('GET', ff_key.exec(k.tag, eid, 'policy')) or ''
        local attached, timeout_ms = policy_facts(policy_json)
        local capable_ix = nil
        if not ff_empty(core.required_capabilities) then
          -- Our capability index of the lane: eligible executions requiring exactly this sorted list.
          capable_ix = ff_key.lane(k.tag, c.lane, 'caps', core.required_capabilities)
        end
        local fits = caps_ok(core.required_capabilities, c.have)
        if not fits and capable_ix and redis.call('ZSCORE', capable_ix, eid) then
          -- Indexed for capable workers, who claim it from there: left alone. A route block would
          -- bounce it between workers that cannot run it.
          fits = false
        elseif attached or not ff_empty(core.budget_ids) or not ff_empty(core.quota_policy_id) or not fits then
          slow[#slow + 1] = eid
        else
          -- ff_claim_resumed_execution checks only phase and attempt_state; ff_claim_execution
          -- also ownership, outcome and a running attempt (its refusals: skip).
          -- The next (lease_id, attempt_id) pair, read in place (claim_args checked them all).
          local at, r = c.ids_at + 2 * #claimed, nil
          local lid, aid = c.args[at], c.args[at + 1]
          if core.attempt_state == 'attempt_interrupted' then
            r = resumed_claim(k, eid, core_key, grant_key, core, c, lid, now, no_grant)
          elseif core.ownership_state == 'unowned' and core.terminal_outcome == 'none'
              and core.attempt_state ~= 'running_attempt' then
            r = fresh_claim(k, eid, core_key, grant_key, core, c, lid, aid, now, timeout_ms, no_grant)
          end
          if r then
            if capable_ix then redis.call('ZREM', capable_ix, eid) end
            local payload = fresh and fresh.payload or redis.call('GET', ff_key.exec(k.tag, eid, 'payload')) or ''
            local tags = fresh and fresh.no_tags and {} or redis.call('HGETALL', ff_key.exec(k.tag, eid, 'tags'))
            claimed[#claimed + 1] = {eid, r[1], r[2], r[3], r[4], r[5], r[6], core.execution_kind or '',
              payload, policy_json, tags}
          elseif k.capable then
            redis.call('ZREM', k.capable, eid)
          end
        end
      end
    end
    return claimed, slow, now
  end

  -- A lane's idle set (L:idle), or with `csv` that capability list's (L:idle:caps:<csv>): what claims list
  -- workers on and creates pop them from.
  local function idle_key(tag, lane, csv)
    if csv then return ff_key.lane(tag, lane, 'idle:caps', csv) end
    return ff_key.lane(tag, lane, 'idle')
  end

  -- The idle set a claim from k's source lists its worker on: the lane's (L:idle) for its eligible set, or
  -- for a capability index L:caps:<csv> that list's own (L:idle:caps:<csv>), so a create of work needing
  -- exactly those capabilities hands it to a worker that can run it. nil for an index that is not this
  -- lane's (no listing: nothing would ever pop it).
  local function idle_key_of(k, lane)
    if not k.capable then return idle_key(k.tag, lane) end
    local prefix = ff_key.lane(k.tag, lane, 'caps', '')
    if #k.capable <= #prefix or string.sub(k.capable, 1, #prefix) ~= prefix then return nil end
    return idle_key(k.tag, lane, string.sub(k.capable, #prefix + 1))
  end

  -- pick_and_claim, then the worker's place on its source's idle set (ours, idle_key_of: worker instance
  -- ids by when they last came up short): on it when the claim left it a free slot (fewer claimed than asked —
  -- it asked for at most its free slots), off it when the claim was full. Only for a worker that said it
  -- listens (c.idle); asking for nothing (c.n = 0) says nothing about its slots.
  local function claim_batch(k, c, now)
    local claimed, slow
    claimed, slow, now = pick_and_claim(k, c, now)
    if c.idle and c.n > 0 then
      local idle = idle_key_of(k, c.lane)
      if not idle then return claimed, slow end
      if #claimed + #slow < c.n then
        redis.call('ZADD', idle, now or ff_now(), c.member)
      else
        redis.call('ZREM', idle, c.member)
      end
    end
    return claimed, slow
  end

  -- A completed flow member's outgoing edges, satisfied here as ff_resolve_dependency(success) would
  -- (the completion listener's later call finds them already_resolved), so a child on this lane and
  -- partition is claimed by this same call. Flows cancelled with cancel_all are left to the cascade,
  -- as the Python resolver leaves them. Returns {child_eid, lane} of the children made eligible.
  local function satisfy_outgoing(tag, eid, flow_id, result_key, now)
    local flow = redis.call('HMGET', ff_key.flow(tag, flow_id, 'core'), 'public_flow_state', 'cancellation_policy')
    if flow[1] == 'cancelled' and flow[2] == 'cancel_all' then return {} end
    local made = {}
    for _, edge_id in ipairs(redis.call('SMEMBERS', ff_key.flow(tag, flow_id, 'out', eid))) do
      local child = redis.call('HGET', ff_key.flow(tag, flow_id, 'edge', edge_id), 'downstream_execution_id')
      if child then
        local dep_key = ff_key.exec(tag, child, 'dep', edge_id)
        local dep = ff_hmget(dep_key, { 'state', 'data_passing_ref' })
        local group_key = ff_key.flow(tag, flow_id, 'edgegroup', child)
        local variant = redis.call('HGET', group_key, 'policy_variant')
        -- any_of / quorum groups are decided by ff_resolve_dependency (the completion listener's call).
        if dep and dep.state ~= 'satisfied' and dep.state ~= 'impossible'
            and variant ~= 'any_of' and variant ~= 'quorum' then
          local child_core = ff_key.exec(tag, child, 'core')
          local lane = redis.call('HGET', child_core, 'lane_id')
          if ff_empty(lane) then lane = 'default' end
          local _, eligible = ff_satisfy_dependency({
            core = child_core, meta = ff_key.exec(tag, child, 'deps:meta'),
            unresolved = ff_key.exec(tag, child, 'deps:unresolved'), dep = dep_key,
            eligible = ff_key.lane(tag, lane, 'eligible'), blocked = ff_key.lane(tag, lane, 'blocked:dependencies'),
            payload = ff_key.exec(tag, child, 'payload'), result = result_key, group = group_key,
          }, dep, edge_id, now)
          if eligible then made[#made + 1] = {child, lane} end
        end
      end
    end
    return made
  end

  -- Wake hint (ffcore.wake: channel ff:wake:<lane>, message = partition index) to every listening worker; for
  -- work needing capabilities, "<partition> <csv>" (tokens hold no spaces): workers lacking them ignore it.
  local function wake(lane, tag, csv)
    local part = string.match(tag, '(%d+)}$') or ''
    redis.call('PUBLISH', ff_key.wake(lane), csv and (part .. ' ' .. csv) or part)
  end

  -- Length-prefixed fields ("<bytes>:<text>" each): a hand-off message carries payloads of any bytes.
  local function netstrings(out, list)
    for _, v in ipairs(list) do
      v = tostring(v)
      out[#out + 1] = #v .. ':' .. v
    end
  end

  -- Hand the head of a source on this partition to the idle worker `p` (issue #21: one round trip per task
  -- fewer): the lane's eligible set, or with `csv` the capability index of that list (the worker was listed
  -- on its idle set, so it holds those capabilities). Claimed here for it exactly as its own ff_claim_next
  -- (ff_claim_capable) of one would (its lease parameters from its idle member, the lease and attempt ids
  -- minted by the create's caller, ARGV[15..16]) and sent on its channel: "\1" then length-prefixed lane,
  -- partition and the claim reply's row (ffcore/wake.py parse_handoff). Returns true when it was handed a
  -- task, or told of slow heads its own claim takes; false when it is not listening or its leases here fill
  -- its slots (it was listed from another source meanwhile); nil when nothing was there to claim.
  local function hand_off(lane, tag, part, channel, idle_key, p, csv, args, now, fresh)
    if tonumber(redis.call('PUBSUB', 'NUMSUB', channel)[2]) == 0 then return false end
    local leases = ff_key.worker_leases(tag, p.wiid)
    local held = redis.call('SCARD', leases)
    if held >= p.slots then return false end
    local k = {
      eligible = ff_key.lane(tag, lane, 'eligible'), lease_expiry = ff_key.index(tag, 'lease_expiry'),
      worker_leases = leases, active = ff_key.lane(tag, lane, 'active'),
      attempt_timeout = ff_key.index(tag, 'attempt_timeout'), tag = tag,
    }
    local have = {}
    if csv then
      k.capable = ff_key.lane(tag, lane, 'caps', csv)
      for tok in string.gmatch(csv, '[^,]+') do have[tok] = true end
    end
    local c = {worker_id = p.worker_id, wiid = p.wiid, lane = lane, caps = csv or '', have = have, ttl = p.ttl,
      renew = p.renew, n = 1, args = args, ids_at = 15, fresh = fresh}
    local claimed, slow = pick_and_claim(k, c, now)
    if #slow > 0 then redis.call('PUBLISH', channel, lane .. ' ' .. part) end  -- its own claim takes those
    if #claimed == 0 then return #slow > 0 or nil end
    -- Still a free slot by its leases here (the claim added this one lease: no second SCARD): listed again
    -- (behind the others idle), so the next create does not find nobody idle while it runs this one. Its next
    -- full claim takes it off.
    if held + #claimed < p.slots then redis.call('ZADD', idle_key, now, p.member) end
    local row, out = claimed[1], {'\1'}
    netstrings(out, {lane, part})
    netstrings(out, {row[1], row[2], row[3], row[4], row[5], row[6], row[7], row[8], row[9], row[10]})
    netstrings(out, {#row[11]})
    netstrings(out, row[11])
    redis.call('PUBLISH', channel, table.concat(out))
    return true
  end

  -- An idle member: "<wiid>", or "<wiid>\t<lease_ttl_ms>\t<renew_before_ms>\t<slots>\t<worker_id>" for a
  -- worker that takes hand-offs (its claims' own ARGV; ffcore.functions.idle_member).
  local function parse_member(m)
    local wiid, ttl, renew, slots, worker_id = string.match(m, '^([^\t]*)\t([^\t]*)\t([^\t]*)\t([^\t]*)\t(.*)$')
    ttl, renew, slots = tonumber(ttl), tonumber(renew), tonumber(slots)
    if not (wiid and ttl and ttl > 0 and renew and slots) then return {wiid = m} end
    return {wiid = wiid, ttl = ttl, renew = renew, slots = slots, worker_id = worker_id, member = m}
  end

  -- Members one create pops at most from an idle set looking for a worker that can take its work.
  local OFFERS = 3

  -- Wake ONE idle worker for work on this partition (issue #21: a create woke every worker, all but one of
  -- whose claims came back empty): the one idle longest on the lane's idle set — or, with `csv`, on the idle
  -- set of workers that claimed from that capability list's index — taken off it, on its own channel:
  -- handed the source's head when it takes hand-offs and the create's caller passed ids (`args`, at server
  -- time `now`), else told "<lane> <partition>". Workers popped that are not listening (gone without
  -- leaving the set; on a cluster the count is the local node's only) or whose slots are full are passed
  -- over. Returns whether a worker was handed work or told.
  local function wake_idle(lane, tag, csv, args, now, fresh)
    local key = idle_key(tag, lane, csv)
    local part = string.match(tag, '(%d+)}$') or ''
    local ids = args and not ff_empty(args[15]) and not ff_empty(args[16])
    for _ = 1, OFFERS do
      local got = redis.call('ZPOPMIN', key)
      if not got[1] then return false end
      local p = parse_member(got[1])
      local channel = ff_key.worker_wake(p.wiid)
      local handed = nil
      if p.ttl and ids then handed = hand_off(lane, tag, part, channel, key, p, csv, args, now, fresh) end
      if handed then return true end
      if handed == nil and redis.call('PUBLISH', channel, lane .. ' ' .. part) > 0 then return true end
    end
    return false
  end

  -- wake_idle on the lane's idle set; nobody there: every worker of the lane, as before.
  local function wake_one(lane, tag, args, now, fresh)
    if not wake_idle(lane, tag, nil, args, now, fresh) then wake(lane, tag) end
  end

  -- Wake hints for children this call made eligible but did not claim: another lane, or past the batch.
  local function announce(made, claimed, tag)
    if #made == 0 then return end
    local taken = {}
    for _, row in ipairs(claimed) do taken[row[1]] = true end
    local lanes = {}
    for _, m in ipairs(made) do
      if not taken[m[1]] then lanes[m[2]] = true end
    end
    for lane in pairs(lanes) do wake(lane, tag) end
  end

  local function claim_keys(keys, o)
    return {
      eligible = keys[o], lease_expiry = keys[o + 1], worker_leases = keys[o + 2], active = keys[o + 3],
      attempt_timeout = keys[o + 4], tag = ff_tag_of(keys[o]),
    }
  end

  -- ff_create_fast's template: the contract's core fields with the values most creates store.
  local TEMPLATE_PAIRS = ff_create_core_pairs({
    eid = '', namespace = 'default', lane_id = 'default', kind = '', partition_id = '0', priority = '0',
    creator = 'client', eligibility = 'eligible_now', blocking = 'waiting_for_worker', detail = '',
    public = 'waiting', now = '', delay_until = '',
  })
  local template_id = nil  -- computed on first use (the string library is not there at load time)

  local function template_key(tag)
    if not template_id then
      local h, text = 5381, table.concat(TEMPLATE_PAIRS, '\0')
      for i = 1, #text do h = (h * 33 + string.byte(text, i)) % 4294967296 end
      template_id = string.format('%08x', h)
    end
    return ff_key.core_template(tag, template_id)
  end

  local function copy_core(core_key, pairs)
    local template = template_key(ff_tag_of(core_key))
    if redis.call('COPY', template, core_key) == 0 then  -- first create on this partition
      redis.call('HSET', template, unpack(TEMPLATE_PAIRS))
      redis.call('COPY', template, core_key)
    end
    local diff, n = {}, 0
    for i = 1, #pairs, 2 do
      local v = pairs[i + 1]
      if v ~= TEMPLATE_PAIRS[i + 1] then
        diff[n + 1], diff[n + 2] = pairs[i], v
        n = n + 2
      end
    end
    if n > 0 then redis.call('HSET', core_key, unpack(diff)) end
  end

  local CREATED_AT  -- position of created_at's value in a core pairs list
  for i = 1, #TEMPLATE_PAIRS, 2 do
    if TEMPLATE_PAIRS[i] == 'created_at' then CREATED_AT = i + 1 end
  end

  redis.register_function('ff_create_fast', function(keys, args)
    local index = keys[9]
    if not index then return ff_create(keys, args, copy_core) end
    if ff_tag_of(index) ~= ff_tag_of(keys[1]) then
      return ff_err('invalid_input', 'KEYS[9] must share the tag of KEYS[1]')
    end
    local created_at, made
    local reply = ff_create(keys, args, function(core_key, pairs)
      created_at, made = pairs[CREATED_AT], pairs
      copy_core(core_key, pairs)
    end)
    if created_at and reply[2] == 'OK' then
      redis.call('ZADD', index, created_at, args[1])
      -- KEYS[10..]: our per-kind / per-tag listing indexes (ffcore.execution.filter_index), scored alike.
      for i = 10, #keys do
        if ff_tag_of(keys[i]) == ff_tag_of(keys[1]) then redis.call('ZADD', keys[i], created_at, args[1]) end
      end
      local mode = args[14]
      if reply[4] == 'waiting' and (mode == '1' or mode == '2') then
        local tag, now = ff_tag_of(keys[1]), tonumber(created_at)
        local csv = nil
        if string.find(args[7] or '', 'required_capabilities', 1, true) then
          csv = redis.call('HGET', keys[1], 'required_capabilities')
          if ff_empty(csv) then csv = nil end
        end
        if csv then
          -- Work needing capabilities goes to a worker idle on that list's idle set; failing one, "1" tells
          -- the lane, naming the list (the one idle longest on the lane's set may lack them), "2" nobody.
          if not wake_idle(args[3], tag, csv, args, now) and mode == '1' then wake(args[3], tag, csv) end
        elseif mode == '1' then
          -- What a claim of this very execution would read back (payload, policy, tags as ff_create wrote them).
          local tags_json = args[11] or ''
          wake_one(args[3], tag, args, now, {eid = args[1], pairs = made, policy = args[7] or '',
            payload = args[8] or '', no_tags = tags_json == '' or tags_json == '{}'})
        end
      end
    end
    return reply
  end)

  redis.register_function('ff_claim_next', function(keys, args)
    local bad, c = claim_args(args, 1)
    if bad then return bad end
    local claimed, slow = claim_batch(claim_keys(keys, 1), c)
    return {1, 'OK', claimed, slow}
  end)

  redis.register_function('ff_claim_capable', function(keys, args)
    local bad, c = claim_args(args, 1)
    if bad then return bad end
    local k = claim_keys(keys, 1)
    k.capable = keys[7]
    if ff_tag_of(k.capable) ~= k.tag then return ff_err('invalid_input', 'KEYS[7] must share the tag of KEYS[1]') end
    local claimed, slow = claim_batch(k, c)
    return {1, 'OK', claimed, slow}
  end)

  redis.register_function('ff_complete_and_claim_next', function(keys, args)
    local bad, c = claim_args(args, 6)
    if bad then return bad end
    local err, core, now, result_key = ff_complete_success(keys, args)
    if err then return err end
    local eid = core.execution_id

    local ck = claim_keys(keys, 13)
    if keys[19] and ff_tag_of(keys[19]) == ck.tag then ck.capable = keys[19] end
    local made = {}
    if not ff_empty(core.flow_id) then
      made = satisfy_outgoing(ff_tag_of(keys[1]), eid, core.flow_id, result_key, now)
    end
    local claimed, slow = claim_batch(ck, c)
    announce(made, claimed, ck.tag)
    return {1, 'OK', 'completed', claimed, slow}
  end)

  redis.register_function('ff_deliver_signal_fast', function(keys, args)
    local k = {core = keys[1], condition = keys[2], wp_signals = keys[3], exec_signals = keys[4],
      signal = keys[5], payload = keys[6], idem = keys[7], wp = keys[8], susp = keys[9],
      susp_timeout = keys[10], sec = keys[11]}
    local reply = ff_deliver(k, args)
    ff_note_delivery(keys[12], args, reply)
    if k.eligible_now then wake(k.lane, ff_tag_of(keys[1])) end
    return reply
  end)

  local MAX_BATCH = 64

  redis.register_function('ff_complete_batch_and_claim', function(keys, args)
    local count, capable = tonumber(args[1]), args[2] == '1'
    if not count or count ~= math.floor(count) or count < 1 or count > MAX_BATCH then
      return ff_err('invalid_input', 'completions must be an integer 1..' .. MAX_BATCH)
    end
    local ko = capable and 8 or 7
    if #keys ~= ko - 1 + 12 * count then return ff_err('invalid_input', 'expected 12 KEYS per completion') end
    local wants = args[3] or ''
    if #wants ~= count or string.find(wants, '[^01]') then
      return ff_err('invalid_input', 'ARGV[3] must hold one 0/1 character per completion')
    end
    local bad, c = claim_args(args, 4 + 5 * count)
    if bad then return bad end
    local _, wanted = string.gsub(wants, '1', '')
    if c.n ~= wanted then return ff_err('invalid_input', 'one (lease_id, attempt_id) pair per wanted successor') end
    local ck = claim_keys(keys, 1)
    for i = 2, #keys do
      if ff_tag_of(keys[i]) ~= ck.tag then return ff_err('invalid_input', 'every KEY must share the tag of KEYS[1]') end
    end
    if capable then ck.capable = keys[7] end

    -- One server clock reading for the whole call (one atomic step, as a single completion's is).
    local outcomes, made, claims, now = {}, {}, 0, ff_now()
    for j = 0, count - 1 do
      local err, core, _, result_key = ff_complete_success(keys, args, now, ko - 1 + 12 * j, 3 + 5 * j)
      if err then
        outcomes[j + 1] = err
      else
        outcomes[j + 1] = 'completed'
        if string.byte(wants, j + 1) == 49 then claims = claims + 1 end
        if not ff_empty(core.flow_id) then
          for _, m in ipairs(satisfy_outgoing(ck.tag, core.execution_id, core.flow_id, result_key, now)) do
            made[#made + 1] = m
          end
        end
      end
    end
    c.n = claims
    local claimed, slow = claim_batch(ck, c, now)
    announce(made, claimed, ck.tag)
    return {1, 'OK', outcomes, claimed, slow}
  end)
end

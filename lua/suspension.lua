-- suspension.lua — suspend / resume, waitpoints, suspension timeouts and the waitpoint HMAC keystore.
--
-- Keys touched (contract §3): E:core, A(i), E:lease:current, E:lease:history, E:suspension:current,
-- E:waitpoints, W(w), W(w):signals (read), W(w):condition, S(i):meta, SEC (ff:sec:{fp:N}:waitpoint_hmac),
-- I:lease_expiry, I:worker:<wiid>:leases, I:suspension_timeout, I:pending_waitpoint_expiry,
-- I:attempt_timeout, L:active, L:suspended, L:eligible, L:delayed, L:terminal.
--
-- ff_suspend_execution (17 KEYS / 17 ARGV)
--   KEYS: 1 E:core · 2 A(current) · 3 E:lease:current · 4 E:lease:history · 5 I:lease_expiry ·
--         6 I:worker:<wiid>:leases · 7 E:suspension:current · 8 W(w) · 9 W(w):signals ·
--         10 I:suspension_timeout · 11 I:pending_waitpoint_expiry · 12 L:active · 13 L:suspended ·
--         14 E:waitpoints · 15 W(w):condition · 16 I:attempt_timeout · 17 SEC
--   ARGV: 1 execution_id · 2 attempt_index · 3 attempt_id · 4 lease_id · 5 lease_epoch · 6 suspension_id ·
--         7 waitpoint_id · 8 waitpoint_key · 9 reason_code · 10 requested_by · 11 timeout_at ("" = none) ·
--         12 resume_condition_json · 13 resume_policy_json · 14 continuation_metadata_pointer ·
--         15 use_pending_waitpoint ("1") · 16 timeout_behavior (absent -> fail) · 17 lease_history_maxlen
--   Upstream v0.13's wider call (18 + 3N KEYS / 20 + 2N ARGV, as ff_suspend_typed below) is served by
--   ff_suspend_typed's body, except a pending-waitpoint activation without extras (v0.2.0 body, KEYS 1..17).
-- ff_resume_execution (8 KEYS / 3 ARGV)
--   KEYS: 1 E:core · 2 E:suspension:current · 3 W(w) · 4 W(w):signals (unused) · 5 I:suspension_timeout ·
--         6 L:eligible · 7 L:delayed · 8 L:suspended
--   ARGV: 1 execution_id · 2 trigger_type (informational) · 3 resume_delay_ms (absent -> 0)
-- ff_create_pending_waitpoint (4 KEYS / 5 ARGV)
--   KEYS: 1 E:core · 2 W(w) · 3 I:pending_waitpoint_expiry · 4 SEC
--   ARGV: 1 execution_id · 2 attempt_index · 3 waitpoint_id · 4 waitpoint_key · 5 expires_at
-- ff_expire_suspension (12 KEYS / 1 ARGV)
--   KEYS: 1 E:core · 2 E:suspension:current · 3 W(w) · 4 W(w):condition · 5 A(current) · 6 S(current):meta ·
--         7 I:suspension_timeout · 8 L:suspended · 9 L:terminal · 10 L:eligible · 11 L:delayed (unused) ·
--         12 E:lease:history (unused)
--   ARGV: 1 execution_id
-- ff_close_waitpoint (3 KEYS / 2 ARGV)
--   KEYS: 1 E:core (unused) · 2 W(w) · 3 I:pending_waitpoint_expiry
--   ARGV: 1 waitpoint_id · 2 reason (absent -> proactive_close)
-- ff_rotate_waitpoint_hmac_secret (1 KEY / 3 ARGV)
--   KEYS: 1 SEC
--   ARGV: 1 new_kid · 2 new_secret_hex · 3 grace_ms
-- ff_list_waitpoint_hmac_kids (1 KEY / 0 ARGV)
--   KEYS: 1 SEC

-- Waitpoint helpers shared with signal.lua (the next file): HMAC tokens (§8), resume conditions (§7.3)
-- and the "back to runnable" field set. One table keeps the library's top-level local count low.
local ff_wp = {}

do
  local function is_hex(s)
    return type(s) == 'string' and #s > 0 and #s % 2 == 0 and not string.find(s, '[^0-9a-fA-F]')
  end
  ff_wp.is_hex = is_hex

  local function hex_to_bin(h)
    return (string.gsub(h, '..', function(c) return string.char(tonumber(c, 16)) end))
  end

  -- HMAC-SHA1 (RFC 2104) key pads per secret. The library state lives as long as the loaded
  -- library, so deriving the pads once per secret saves two 64-byte loops on every mint/verify.
  local pad_cache, pad_count = {}, 0
  local function pads(secret_hex)
    local p = pad_cache[secret_hex]
    if p then return p end
    local key = hex_to_bin(secret_hex)
    if #key > 64 then key = hex_to_bin(redis.sha1hex(key)) end
    local ipad, opad = {}, {}
    for i = 1, 64 do
      local b = string.byte(key, i) or 0
      ipad[i] = string.char(bit.bxor(b, 0x36))
      opad[i] = string.char(bit.bxor(b, 0x5c))
    end
    p = {table.concat(ipad), table.concat(opad)}
    if pad_count >= 32 then pad_cache, pad_count = {}, 0 end
    pad_cache[secret_hex] = p
    pad_count = pad_count + 1
    return p
  end

  -- Lowercase hex HMAC-SHA1 of `msg` under the hex-encoded key (caller checked is_hex).
  local function hmac_sha1_hex(secret_hex, msg)
    local p = pads(secret_hex)
    return redis.sha1hex(p[2] .. hex_to_bin(redis.sha1hex(p[1] .. msg)))
  end
  ff_wp.hmac_sha1_hex = hmac_sha1_hex

  local function message(waitpoint_id, waitpoint_key, created_at)
    return waitpoint_id .. '|' .. waitpoint_key .. '|' .. tostring(created_at)
  end

  -- Mint `<kid>:<digest>` with the partition's current kid. Returns token or nil, error_code.
  function ff_wp.mint(sec_key, waitpoint_id, waitpoint_key, created_at)
    if ff_empty(sec_key) then return nil, 'invalid_keys_missing_hmac' end
    local kid = redis.call('HGET', sec_key, 'current_kid')
    if ff_empty(kid) then return nil, 'hmac_secret_not_initialized' end
    local secret = redis.call('HGET', sec_key, 'secret:' .. kid)
    if ff_empty(secret) then return nil, 'hmac_secret_not_initialized' end
    if not is_hex(secret) then return nil, 'invalid_secret' end
    return kid .. ':' .. hmac_sha1_hex(secret, message(waitpoint_id, waitpoint_key, created_at))
  end

  -- Validate a presented token (§8.2 order). Returns nil when valid, else the error code.
  function ff_wp.verify(sec_key, token, waitpoint_id, waitpoint_key, created_at, now)
    if ff_empty(sec_key) then return 'invalid_keys_missing_hmac' end
    if ff_empty(token) then return 'missing_token' end
    local colon = string.find(token, ':', 1, true)
    if not colon or colon == 1 or colon == #token then return 'invalid_token' end
    local kid, digest = string.sub(token, 1, colon - 1), string.sub(token, colon + 1)
    if #digest ~= 40 then return 'invalid_token' end
    local v = redis.call('HMGET', sec_key, 'current_kid', 'secret:' .. kid, 'expires_at:' .. kid)
    local current, secret = v[1], v[2]
    if ff_empty(current) then return 'hmac_secret_not_initialized' end
    if kid == current then
      if ff_empty(secret) then return 'hmac_secret_not_initialized' end
    elseif secret then
      -- A demoted kid validates only inside its grace window.
      local exp = tonumber(v[3])
      if not exp or exp <= 0 or exp < now then return 'token_expired' end
    else
      return 'invalid_token'
    end
    if not is_hex(secret) then return 'invalid_secret' end
    local want = hmac_sha1_hex(secret, message(waitpoint_id, waitpoint_key, created_at))
    -- Constant-time comparison (case-sensitive: the digest is lowercase hex).
    local diff = 0
    for i = 1, 40 do
      diff = bit.bor(diff, bit.bxor(string.byte(want, i), string.byte(digest, i)))
    end
    if diff ~= 0 then return 'invalid_token' end
    return nil
  end

  -- Resume condition (§7.3) decoded into the flat field map of W(w):condition. Raises on bad JSON
  -- (upstream raises too); callers decode before their first write.
  function ff_wp.new_condition(json, now)
    local c = cjson.decode(json)
    if type(c) ~= 'table' then error('resume_condition_json must be a JSON object') end
    local names = c.required_signal_names
    if type(names) ~= 'table' or #names == 0 then names = {''} end
    local mode = c.signal_match_mode
    if type(mode) ~= 'string' then mode = 'any' end
    local ctype = c.condition_type
    if type(ctype) ~= 'string' then ctype = 'signal_set' end
    local f = {
      condition_type = ctype,
      match_mode = mode,
      minimum_signal_count = tonumber(c.minimum_signal_count) or 1,
      total_matchers = #names,
      satisfied_count = 0,
      closed = '0',
      updated_at = now,
    }
    for i, name in ipairs(names) do
      local t = type(name)
      if t ~= 'string' and t ~= 'number' then name = '' end
      f['matcher:' .. (i - 1) .. ':name'] = tostring(name)
      f['matcher:' .. (i - 1) .. ':satisfied'] = '0'
      f['matcher:' .. (i - 1) .. ':signal_id'] = ''
    end
    return f
  end

  -- Match one signal against a condition map (as built above or read with HGETALL): the first
  -- unsatisfied matcher whose name is "" or equals the signal name. Updates `f` in place and
  -- returns the matcher's field prefix, or nil when nothing matched.
  function ff_wp.match(f, signal_name, signal_id)
    local total = tonumber(f.total_matchers) or 0
    for i = 0, total - 1 do
      local p = 'matcher:' .. i .. ':'
      if f[p .. 'satisfied'] == '0' then
        local name = f[p .. 'name']
        if name == '' or name == signal_name then
          f[p .. 'satisfied'] = '1'
          f[p .. 'signal_id'] = signal_id
          f.satisfied_count = (tonumber(f.satisfied_count) or 0) + 1
          return p
        end
      end
    end
    return nil
  end

  function ff_wp.satisfied(f)
    local count = tonumber(f.satisfied_count) or 0
    if f.match_mode == 'all' then
      return count >= (tonumber(f.total_matchers) or 0)
    end
    return count >= (tonumber(f.minimum_signal_count) or 1)
  end

  -- E:core fields for "suspended -> runnable" (operator resume, signal resume). A positive delay parks
  -- the execution in L:delayed; delay_until is written so promote_delayed can release it (§10 row 1).
  function ff_wp.resume_fields(now, delay, detail)
    local f = {
      lifecycle_phase = 'runnable', ownership_state = 'unowned', terminal_outcome = 'none',
      attempt_state = 'attempt_interrupted', current_suspension_id = '', current_waitpoint_id = '',
      last_transition_at = now, last_mutation_at = now,
    }
    if delay > 0 then
      f.eligibility_state = 'not_eligible_until_time'
      f.blocking_reason = 'waiting_for_resume_delay'
      f.blocking_detail = detail
      f.public_state = 'delayed'
      f.delay_until = now + delay
    else
      f.eligibility_state = 'eligible_now'
      f.blocking_reason = 'waiting_for_worker'
      f.blocking_detail = ''
      f.public_state = 'waiting'
    end
    return f
  end

  -- Composite resume conditions (upstream v0.13's RFC-014 form, resume_condition_json
  -- {"v":1,"composite":true,"tree":…}). Nodes: `Single` {waitpoint_key, matcher {kind ByName name | Wildcard}},
  -- `AllOf` {members}, `Count` {n, count_kind DistinctWaitpoints | DistinctSignals | DistinctSources,
  -- matcher?, waitpoints (keys)}. Ours on top (our SDK's richer leaves; upstream never writes them): a
  -- Single may carry `names` / `mode` / `minimum` (the contract's matcher list on one waitpoint) instead
  -- of a matcher, and a Count may carry `members` (sub-conditions counted when satisfied) instead of
  -- waitpoints. Every node gets its `path` ("" root, "members[i]", "….members[i]") here.
  -- State lives in upstream's satisfied set E:suspension:current:satisfied_set (tokens `leaf:<path>`,
  -- `node:<path>`, `wp:<id>` / `sig:<id>` / `src:<type>:<identity>`; ours: `count:<path>:<token>` so two
  -- Count nodes never share satisfiers, `m:<path>:<i>` per satisfied matcher of a names leaf) and
  -- `…:satisfied_set:signals` (ids of the signals that contributed).
  local function child_path(path, i)
    if path == '' then return 'members[' .. (i - 1) .. ']' end
    return path .. '.members[' .. (i - 1) .. ']'
  end

  local function matcher_check(node)
    if node.matcher == cjson.null then node.matcher = nil end
    local m = node.matcher
    if m == nil then return nil end
    if type(m) ~= 'table' then return 'matcher: an object' end
    if m.kind == 'Wildcard' then return nil end
    if m.kind == 'ByName' and type(m.name) == 'string' then return nil end
    return 'matcher: ByName {name} or Wildcard'
  end

  -- Validate and normalise a decoded tree; returns an error text or nil. `bound` = waitpoint keys of
  -- the suspension, `seen` collects the keys the tree references.
  function ff_wp.tree_check(node, depth, path, bound, seen)
    if type(node) ~= 'table' then return 'composite: a node must be an object' end
    if depth > 4 then return 'condition_depth_exceeded' end
    node.path = path
    if node.kind == 'Single' then
      local w = node.waitpoint_key
      if type(w) ~= 'string' or not bound[w] then return 'referenced_waitpoint_key_missing_binding' end
      seen[w] = true
      if node.names ~= nil then
        local names = node.names
        if type(names) ~= 'table' or #names == 0 then return 'names: a non-empty list' end
        for _, n in ipairs(names) do
          if type(n) ~= 'string' then return 'required_signal_names: names must be strings' end
        end
        local mode = node.mode or 'any'
        if mode ~= 'any' and mode ~= 'all' and mode ~= 'count' then return 'signal_match_mode: any, all or count' end
        local min = node.minimum or 1
        if type(min) ~= 'number' or min < 1 or min > #names or min ~= math.floor(min) then
          return 'minimum_signal_count: 1..number of matchers'
        end
        node.mode, node.minimum = mode, min
        return nil
      end
      return matcher_check(node)
    end
    if node.kind == 'AllOf' then
      if type(node.members) ~= 'table' or #node.members == 0 then return 'allof_empty_members' end
    elseif node.kind == 'Count' then
      local n = node.n
      if type(n) ~= 'number' or n < 1 or n ~= math.floor(n) then return 'count_n_zero' end
      local kind = node.count_kind or 'DistinctWaitpoints'
      if kind ~= 'DistinctWaitpoints' and kind ~= 'DistinctSignals' and kind ~= 'DistinctSources' then
        return 'count_kind: DistinctWaitpoints, DistinctSignals or DistinctSources'
      end
      node.count_kind = kind
      local e = matcher_check(node)
      if e then return e end
      if node.members == nil then
        local wps = node.waitpoints
        if type(wps) ~= 'table' or #wps == 0 then return 'count_waitpoints_empty' end
        for _, w in ipairs(wps) do
          if type(w) ~= 'string' or not bound[w] then return 'referenced_waitpoint_key_missing_binding' end
          seen[w] = true
        end
        if kind == 'DistinctWaitpoints' and n > #wps then return 'count_exceeds_waitpoint_set' end
        return nil
      end
      if type(node.members) ~= 'table' or #node.members == 0 then return 'count_waitpoints_empty' end
      if n > #node.members then return 'count_exceeds_waitpoint_set' end
    else
      return 'composite: unknown node kind'
    end
    for i, m in ipairs(node.members) do
      local e = ff_wp.tree_check(m, depth + 1, child_path(path, i), bound, seen)
      if e then return e end
    end
    return nil
  end

  local function accepts(m, name)
    return m == nil or m.kind ~= 'ByName' or m.name == name
  end

  local function count_prefix(node)
    return 'count:' .. node.path .. ':'
  end

  local function sat(node, tokens)
    if node.kind == 'Single' then return tokens['leaf:' .. node.path] == true end
    if node.kind == 'AllOf' then
      for _, m in ipairs(node.members) do
        if not sat(m, tokens) then return false end
      end
      return true
    end
    local c = 0
    if node.members then
      for _, m in ipairs(node.members) do
        if sat(m, tokens) then c = c + 1 end
      end
    else
      local prefix = count_prefix(node)
      for t in pairs(tokens) do
        if string.sub(t, 1, #prefix) == prefix then c = c + 1 end
      end
    end
    return c >= node.n
  end

  -- Offer one signal (arrived on waitpoint `wid` with key `wkey`) to every node of the tree that watches
  -- that waitpoint, writing the tokens it earns. Returns effect ('appended_to_waitpoint' when something
  -- was earned, else 'no_op') and whether the whole tree is now satisfied.
  function ff_wp.composite_deliver(tree, set_key, wid, wkey, sig)
    local list = redis.call('SMEMBERS', set_key)
    local tokens = {}
    for _, t in ipairs(list) do tokens[t] = true end
    local added = false
    local function add(t)
      if tokens[t] then return false end
      tokens[t] = true
      redis.call('SADD', set_key, t)
      added = true
      return true
    end
    local function walk(node)
      if node.kind == 'Single' then
        if node.waitpoint_key ~= wkey or tokens['leaf:' .. node.path] then return end
        if node.names then
          local got, taken = 0, false
          for i, n in ipairs(node.names) do
            local t = 'm:' .. node.path .. ':' .. (i - 1)
            if not tokens[t] and not taken and (n == '' or n == sig.name) then
              add(t)
              taken = true
            end
            if tokens[t] then got = got + 1 end
          end
          local need = node.mode == 'all' and #node.names or node.minimum
          if got >= need then add('leaf:' .. node.path) end
        elseif accepts(node.matcher, sig.name) then
          add('leaf:' .. node.path)
        end
        return
      end
      if node.kind == 'Count' and not node.members then
        local watches = false
        for _, w in ipairs(node.waitpoints) do
          if w == wkey then watches = true end
        end
        if not watches or not accepts(node.matcher, sig.name) then return end
        local token
        if node.count_kind == 'DistinctSignals' then
          token = 'sig:' .. sig.id
        elseif node.count_kind == 'DistinctSources' then
          token = 'src:' .. sig.source_type .. ':' .. sig.source_identity
        else
          token = 'wp:' .. wid
        end
        -- Ours is node-scoped; upstream's bare token is kept beside it for upstream readers.
        if add(count_prefix(node) .. token) then redis.call('SADD', set_key, token) end
        return
      end
      for _, m in ipairs(node.members) do walk(m) end
      -- Upstream marks a satisfied inner node with node:<path>.
      if node.path ~= '' and sat(node, tokens) then add('node:' .. node.path) end
    end
    walk(tree)
    if not added then return 'no_op', false end
    redis.call('SADD', set_key .. ':signals', sig.id)
    if sat(tree, tokens) then return 'resume_condition_satisfied', true end
    return 'appended_to_waitpoint', false
  end

  -- Upstream's member map (RFC-014 §4.4, diagnostics): `wp:<key>:<path>` -> path for every node that
  -- watches a waitpoint key.
  function ff_wp.member_map(tree)
    local out = {}
    local function walk(node)
      if node.kind == 'Single' then
        out[#out + 1], out[#out + 2] = 'wp:' .. node.waitpoint_key .. ':' .. node.path, node.path
      elseif node.kind == 'Count' and not node.members then
        for _, w in ipairs(node.waitpoints) do
          out[#out + 1], out[#out + 2] = 'wp:' .. w .. ':' .. node.path, node.path
        end
      else
        for _, m in ipairs(node.members) do walk(m) end
      end
    end
    walk(tree)
    return out
  end
end

do
  local BLOCKING_FOR_REASON = {
    waiting_for_signal = 'waiting_for_signal',
    waiting_for_approval = 'waiting_for_approval',
    waiting_for_callback = 'waiting_for_callback',
    waiting_for_tool_result = 'waiting_for_tool_result',
    waiting_for_operator_review = 'paused_by_operator',
    paused_by_policy = 'paused_by_policy',
    paused_by_budget = 'waiting_for_budget',
    step_boundary = 'waiting_for_signal',
    manual_pause = 'paused_by_operator',
  }

  local NO_TIMEOUT_SCORE = 9999999999999

  -- Replace a condition hash wholesale (a waitpoint id's previous condition must not leak matchers).
  local function write_condition(key, f)
    redis.call('DEL', key)
    ff_hset(key, f)
  end

  -- What both suspend forms check first: the execution exists, the caller holds its lease on the current
  -- attempt, and no suspension is open. Returns core, now and the closed suspension's (closed_at,
  -- waitpoint_id) if there is one — or nil and the refusal.
  local function ff_suspend_preamble(core_key, history_key, susp_key, lease_id, lease_epoch, attempt_id,
                                     attempt_index, maxlen)
    local core = ff_hgetall(core_key)
    if next(core) == nil then return nil, ff_err('execution_not_found') end
    local now = ff_now()
    local lv = ff_validate_lease(core_key, history_key, core, lease_id, lease_epoch, attempt_id, now, maxlen)
    if lv then return nil, lv end
    if tostring(core.current_attempt_index) ~= tostring(attempt_index) then
      return nil, ff_err('invalid_lease_for_suspend')
    end
    local prev = nil
    if redis.call('EXISTS', susp_key) == 1 then
      prev = redis.call('HMGET', susp_key, 'closed_at', 'waitpoint_id')
      if ff_empty(prev[1]) then return nil, ff_err('already_suspended') end
    end
    return core, now, prev
  end

  -- What both suspend forms write once their waitpoints are in place: the execution and its attempt become
  -- suspended, the lease is released (its key, the four lease/activity indexes, a history entry), the
  -- suspension record is written (plus `extra` field/value pairs) and the suspended/timeout indexes set.
  -- `keys` are the shared KEYS 1..17 of both forms; `s` names the suspension (ids and ARGV already bound).
  local function ff_suspend_release(keys, core, now, maxlen, s, extra)
    local core_key, attempt_key, lease_key, history_key = keys[1], keys[2], keys[3], keys[4]
    local lease_expiry_key, worker_leases_key, susp_key = keys[5], keys[6], keys[7]
    local susp_timeout_key, active_key, suspended_key, attempt_timeout_key = keys[10], keys[12], keys[13], keys[16]
    local eid = s.eid
    ff_hset(core_key, ff_clear_lease_fields({
      lifecycle_phase = 'suspended', ownership_state = 'unowned', eligibility_state = 'not_applicable',
      blocking_reason = BLOCKING_FOR_REASON[s.reason_code] or 'waiting_for_signal',
      blocking_detail = 'suspended: waitpoint ' .. s.waitpoint_id .. ' awaiting ' .. tostring(s.reason_code),
      terminal_outcome = 'none', attempt_state = 'attempt_interrupted', public_state = 'suspended',
      current_suspension_id = s.suspension_id, current_waitpoint_id = s.waitpoint_id,
      last_transition_at = now, last_mutation_at = now,
    }))
    redis.call('HSET', attempt_key, 'attempt_state', 'suspended', 'suspended_at', now,
      'suspension_id', s.suspension_id)
    redis.call('DEL', lease_key)
    redis.call('ZREM', lease_expiry_key, eid)
    redis.call('SREM', worker_leases_key, eid)
    redis.call('ZREM', active_key, eid)
    redis.call('ZREM', attempt_timeout_key, eid)
    ff_history(history_key, maxlen, 'released', {
      'lease_id', core.current_lease_id or '', 'lease_epoch', core.current_lease_epoch or '',
      'attempt_index', core.current_attempt_index or '', 'attempt_id', core.current_attempt_id or '',
      'reason', 'suspend', 'ts', now,
    })
    -- `extra` goes last, unpacked: a missing argument still fails the HSET as it did when written inline.
    redis.call('HSET', susp_key, 'suspension_id', s.suspension_id, 'execution_id', eid,
      'attempt_index', s.attempt_index, 'waitpoint_id', s.waitpoint_id, 'waitpoint_key', s.waitpoint_key,
      'reason_code', s.reason_code, 'requested_by', s.requested_by, 'created_at', now,
      'timeout_at', s.timeout_at, 'timeout_behavior', s.timeout_behavior,
      'resume_condition_json', s.condition_json, 'resume_policy_json', s.policy_json,
      'continuation_metadata_pointer', s.continuation,
      'buffered_signal_summary_json', '{"total_count":0,"matched_count":0,"signal_names":[]}',
      'last_signal_at', '', 'satisfied_at', '', 'closed_at', '', 'close_reason', '', unpack(extra or {}))
    redis.call('ZADD', suspended_key, s.timeout_num or NO_TIMEOUT_SCORE, eid)
    if s.timeout_num then redis.call('ZADD', susp_timeout_key, s.timeout_num, eid) end
  end

  -- ff_suspend_typed's body (defined below); ff_suspend_execution hands it upstream v0.13's wider calls.
  local suspend_typed

  redis.register_function('ff_suspend_execution', function(keys, args)
    -- Upstream v0.13's shape (18 + 3N KEYS: the dedup key and extra waitpoints) is ff_suspend_typed's, unless
    -- it activates a pending waitpoint, which v0.13 allows without extras and typed does not: then the
    -- v0.2.0 body below serves it (the idempotency key is not kept). 17 KEYS: v0.2.0, unchanged.
    if #keys >= 18 and not (args[15] == '1' and (tonumber(args[20]) or 0) == 0) then
      return suspend_typed(keys, args)
    end
    -- KEYS 2, 3, 5, 6, 10, 12, 13, 16 are written by ff_suspend_release.
    local core_key, history_key, susp_key, wp_key = keys[1], keys[4], keys[7], keys[8]
    local wp_signals_key, pending_expiry_key, waitpoints_key = keys[9], keys[11], keys[14]
    local condition_key, sec_key = keys[15], keys[17]
    local eid, attempt_index, attempt_id = args[1], args[2], args[3]
    local lease_id, lease_epoch, suspension_id = args[4], args[5], args[6]
    local waitpoint_id, waitpoint_key = args[7], args[8]
    local reason_code, requested_by, timeout_at = args[9], args[10], args[11]
    local condition_json, policy_json = args[12], args[13]
    local continuation = args[14] or ''
    local use_pending = args[15] == '1'
    local timeout_behavior = args[16] or 'fail'
    local maxlen = 1000
    if args[17] ~= nil then
      maxlen = tonumber(args[17])
      if not maxlen then error('lease_history_maxlen must be a number') end
    end

    local core, now, prev = ff_suspend_preamble(core_key, history_key, susp_key, lease_id, lease_epoch, attempt_id,
                                                attempt_index, maxlen)
    if core == nil then return now end  -- the refusal

    -- Everything that can raise is checked before the first write.
    local timeout_num = nil
    if not ff_empty(timeout_at) then
      timeout_num = tonumber(timeout_at)
      if not timeout_num then error('timeout_at must be a number or empty') end
    end
    local cond = ff_wp.new_condition(condition_json, now)

    -- A closed previous episode is archived: its waitpoint joins the history set.
    if prev then
      if not ff_empty(prev[2]) then redis.call('SADD', waitpoints_key, prev[2]) end
      redis.call('DEL', susp_key)
    end

    local expires_at = timeout_at or ''
    local token
    if use_pending then
      local wp = ff_hgetall(wp_key)
      if next(wp) == nil then return ff_err('waitpoint_not_found') end
      if wp.state ~= 'pending' then return ff_err('waitpoint_not_pending') end
      if wp.execution_id ~= eid or tostring(wp.attempt_index) ~= tostring(attempt_index) then
        return ff_err('invalid_waitpoint_for_execution')
      end
      local wexp = tonumber(wp.expires_at)
      if not ff_empty(wp.expires_at) and wexp and wexp <= now then
        return ff_err('pending_waitpoint_expired')
      end
      if ff_empty(wp.waitpoint_token) then return ff_err('waitpoint_not_token_bound') end
      waitpoint_id = wp.waitpoint_id or waitpoint_id
      waitpoint_key = wp.waitpoint_key or ''
      token = wp.waitpoint_token

      -- Replay signals buffered while the waitpoint was pending through the new condition.
      local entries = redis.call('XRANGE', wp_signals_key, '-', '+')
      for _, entry in ipairs(entries) do
        local ef = entry[2]
        local name, sid = '', ''
        for i = 1, #ef, 2 do
          if ef[i] == 'signal_name' then name = ef[i + 1] elseif ef[i] == 'signal_id' then sid = ef[i + 1] end
        end
        ff_wp.match(cond, name, sid)
      end
      redis.call('ZREM', pending_expiry_key, waitpoint_id)
      if ff_wp.satisfied(cond) then
        -- Satisfied before the worker even suspended: close the waitpoint, keep the lease.
        redis.call('HSET', wp_key, 'suspension_id', suspension_id, 'state', 'closed',
          'activated_at', now, 'expires_at', expires_at, 'satisfied_at', now, 'closed_at', now,
          'close_reason', 'resumed')
        write_condition(condition_key, cond)
        return {1, 'ALREADY_SATISFIED', suspension_id, waitpoint_id, waitpoint_key, token}
      end
      redis.call('HSET', wp_key, 'suspension_id', suspension_id, 'state', 'active',
        'activated_at', now, 'expires_at', expires_at)
      write_condition(condition_key, cond)
    else
      local code
      token, code = ff_wp.mint(sec_key, waitpoint_id, waitpoint_key, now)
      if not token then return ff_err(code) end
      redis.call('HSET', wp_key, 'waitpoint_id', waitpoint_id, 'execution_id', eid,
        'attempt_index', attempt_index, 'suspension_id', suspension_id, 'waitpoint_key', waitpoint_key,
        'waitpoint_token', token, 'state', 'active', 'created_at', now, 'activated_at', now,
        'expires_at', expires_at, 'signal_count', '0', 'matched_signal_count', '0', 'last_signal_at', '')
      write_condition(condition_key, cond)
    end

    redis.call('SADD', waitpoints_key, waitpoint_id)
    ff_suspend_release(keys, core, now, maxlen, {
      eid = eid, attempt_index = attempt_index, suspension_id = suspension_id, waitpoint_id = waitpoint_id,
      waitpoint_key = waitpoint_key, reason_code = reason_code, requested_by = requested_by,
      timeout_at = expires_at, timeout_num = timeout_num, timeout_behavior = timeout_behavior,
      condition_json = condition_json, policy_json = policy_json, continuation = continuation,
    })
    return ff_ok(suspension_id, waitpoint_id, waitpoint_key, token)
  end)

  redis.register_function('ff_resume_execution', function(keys, args)
    local core_key, susp_key, wp_key = keys[1], keys[2], keys[3]
    local susp_timeout_key, eligible_key, delayed_key, suspended_key = keys[5], keys[6], keys[7], keys[8]
    local eid = args[1]
    local delay_arg = args[3] or '0'

    local core = redis.call('HMGET', core_key, 'lifecycle_phase', 'priority', 'created_at')
    if not core[1] then return ff_err('execution_not_found') end
    if core[1] ~= 'suspended' then return ff_err('execution_not_suspended') end
    local susp = redis.call('HMGET', susp_key, 'suspension_id', 'closed_at')
    if ff_empty(susp[1]) or not ff_empty(susp[2]) then return ff_err('execution_not_suspended') end
    local delay = tonumber(delay_arg)
    if not delay then error('resume_delay_ms must be a number') end
    delay = math.floor(delay)

    local now = ff_now()
    local fields = ff_wp.resume_fields(now, delay, 'resume delay ' .. ff_int_text(delay) .. 'ms')
    ff_hset(core_key, fields)
    redis.call('ZREM', suspended_key, eid)
    if delay > 0 then
      redis.call('ZADD', delayed_key, now + delay, eid)
    else
      redis.call('ZADD', eligible_key, ff_eligible_score(core[2], core[3]), eid)
    end
    redis.call('HSET', wp_key, 'state', 'closed', 'satisfied_at', now, 'closed_at', now,
      'close_reason', 'resumed')
    redis.call('HSET', susp_key, 'satisfied_at', now, 'closed_at', now, 'close_reason', 'resumed')
    redis.call('ZREM', susp_timeout_key, eid)
    return ff_ok(fields.public_state)
  end)

  redis.register_function('ff_create_pending_waitpoint', function(keys, args)
    local core_key, wp_key, pending_expiry_key, sec_key = keys[1], keys[2], keys[3], keys[4]
    local eid, attempt_index, waitpoint_id, waitpoint_key, expires_at = args[1], args[2], args[3], args[4], args[5]

    local core = redis.call('HMGET', core_key, 'lifecycle_phase', 'ownership_state', 'current_attempt_index',
      'terminal_outcome', 'current_lease_epoch')
    if not core[1] then return ff_err('execution_not_found') end
    if core[1] ~= 'active' then return ff_err('execution_not_active', core[4] or '', core[5] or '') end
    if core[2] ~= 'leased' then return ff_err('no_active_lease') end
    if tostring(core[3]) ~= tostring(attempt_index) then return ff_err('stale_lease') end
    local state = redis.call('HGET', wp_key, 'state')
    if state == 'pending' or state == 'active' then return ff_err('waitpoint_already_exists') end
    local expires_num = tonumber(expires_at)
    if not expires_num then error('expires_at must be a number') end

    local now = ff_now()
    local token, code = ff_wp.mint(sec_key, waitpoint_id, waitpoint_key, now)
    if not token then return ff_err(code) end
    redis.call('HSET', wp_key, 'waitpoint_id', waitpoint_id, 'execution_id', eid,
      'attempt_index', attempt_index, 'suspension_id', '', 'waitpoint_key', waitpoint_key,
      'waitpoint_token', token, 'state', 'pending', 'created_at', now, 'activated_at', '',
      'satisfied_at', '', 'closed_at', '', 'expires_at', expires_at, 'close_reason', '',
      'signal_count', '0', 'matched_signal_count', '0', 'last_signal_at', '')
    redis.call('ZADD', pending_expiry_key, expires_num, waitpoint_id)
    return ff_ok(waitpoint_id, waitpoint_key, token)
  end)

  -- timeout_behavior -> terminal outcome, close reason, attempt end state (anything unknown fails).
  local TIMEOUT_TERMINAL = {
    cancel = {'cancelled', 'timed_out_cancel', 'ended_cancelled'},
    expire = {'expired', 'timed_out_expire', 'ended_failure'},
  }
  local TIMEOUT_FAIL = {'failed', 'timed_out_fail', 'ended_failure'}

  redis.register_function('ff_expire_suspension', function(keys, args)
    local core_key, susp_key, wp_key, condition_key = keys[1], keys[2], keys[3], keys[4]
    local attempt_key, stream_meta_key, susp_timeout_key = keys[5], keys[6], keys[7]
    local suspended_key, terminal_key, eligible_key = keys[8], keys[9], keys[10]
    local eid = args[1]

    local core = ff_hgetall(core_key)
    if next(core) == nil then
      redis.call('ZREM', susp_timeout_key, eid)
      return ff_ok('not_found_cleaned')
    end
    if core.lifecycle_phase ~= 'suspended' then
      redis.call('ZREM', susp_timeout_key, eid)
      return ff_ok('not_suspended_cleaned')
    end
    local susp = redis.call('HMGET', susp_key, 'suspension_id', 'closed_at', 'timeout_at', 'timeout_behavior')
    if ff_empty(susp[1]) or not ff_empty(susp[2]) then
      redis.call('ZREM', susp_timeout_key, eid)
      return ff_ok('no_active_suspension_cleaned')
    end
    local now = ff_now()
    -- No timeout ("" after escalate or when none was set) is never due (§10 row 2).
    local timeout_at = tonumber(susp[3])
    if not timeout_at or timeout_at == 0 or timeout_at > now then return ff_ok('not_yet_due') end
    local behavior = susp[4]
    if behavior == false then behavior = 'fail' end

    if behavior == 'auto_resume' or behavior == 'auto_resume_with_timeout_signal' then
      local reason = 'timed_out_auto_resume'
      ff_hset(core_key, ff_wp.resume_fields(now, 0))
      redis.call('ZREM', suspended_key, eid)
      redis.call('ZADD', eligible_key, ff_eligible_score(core.priority, core.created_at), eid)
      redis.call('HSET', wp_key, 'state', 'closed', 'closed_at', now, 'close_reason', reason)
      redis.call('HSET', condition_key, 'closed', '1', 'closed_at', now, 'closed_reason', reason)
      redis.call('HSET', susp_key, 'closed_at', now, 'close_reason', reason)
      redis.call('ZREM', susp_timeout_key, eid)
      return ff_ok('auto_resume', 'waiting')
    end

    if behavior == 'escalate' then
      -- Stays suspended, now waiting for an operator; the timeout is consumed.
      redis.call('HSET', core_key, 'lifecycle_phase', core.lifecycle_phase,
        'ownership_state', core.ownership_state or '', 'eligibility_state', core.eligibility_state or '',
        'blocking_reason', 'paused_by_operator',
        'blocking_detail', 'suspension escalated: timeout at ' .. susp[3],
        'terminal_outcome', core.terminal_outcome or '', 'attempt_state', core.attempt_state or '',
        'public_state', core.public_state or '', 'last_mutation_at', now)
      redis.call('HSET', susp_key, 'reason_code', 'waiting_for_operator_review', 'timeout_at', '',
        'timeout_behavior', '')
      redis.call('ZREM', susp_timeout_key, eid)
      return ff_ok('escalate', 'suspended')
    end

    local t = TIMEOUT_TERMINAL[behavior] or TIMEOUT_FAIL
    local outcome, reason, attempt_end = t[1], t[2], t[3]
    local failure_reason = 'suspension_timeout:' .. behavior
    redis.call('HSET', core_key, 'lifecycle_phase', 'terminal', 'ownership_state', 'unowned',
      'eligibility_state', 'not_applicable', 'blocking_reason', 'none', 'blocking_detail', '',
      'terminal_outcome', outcome, 'attempt_state', 'attempt_terminal', 'public_state', outcome,
      'failure_reason', failure_reason, 'completed_at', now, 'current_suspension_id', '',
      'current_waitpoint_id', '', 'last_transition_at', now, 'last_mutation_at', now)
    if not ff_empty(core.current_attempt_index) then
      redis.call('HSET', attempt_key, 'attempt_state', attempt_end, 'ended_at', now,
        'failure_reason', failure_reason, 'suspended_at', '', 'suspension_id', '')
    end
    ff_close_stream_meta(stream_meta_key, now, 'suspension_timeout', false)
    redis.call('HSET', wp_key, 'state', 'closed', 'closed_at', now, 'close_reason', reason)
    redis.call('HSET', condition_key, 'closed', '1', 'closed_at', now, 'closed_reason', reason)
    redis.call('HSET', susp_key, 'closed_at', now, 'close_reason', reason)
    redis.call('ZREM', susp_timeout_key, eid)
    redis.call('ZREM', suspended_key, eid)
    redis.call('ZADD', terminal_key, now, eid)
    return ff_ok(behavior, outcome)
  end)

  redis.register_function('ff_close_waitpoint', function(keys, args)
    local wp_key, pending_expiry_key = keys[2], keys[3]
    local waitpoint_id = args[1]
    local reason = args[2] or 'proactive_close'

    local state = redis.call('HGET', wp_key, 'state')
    if not state and redis.call('EXISTS', wp_key) == 0 then return ff_err('waitpoint_not_found') end
    if state == 'closed' or state == 'expired' then return ff_ok('already_closed') end
    if state ~= 'pending' and state ~= 'active' then return ff_err('waitpoint_not_open') end
    redis.call('HSET', wp_key, 'state', 'closed', 'closed_at', ff_now(), 'close_reason', reason)
    redis.call('ZREM', pending_expiry_key, waitpoint_id)
    return ff_ok()
  end)

  local MAX_SAFE_INT = 9007199254740991

  redis.register_function('ff_rotate_waitpoint_hmac_secret', function(keys, args)
    local sec_key = keys[1]
    local new_kid, new_secret, grace_arg = args[1], args[2], args[3]

    if ff_empty(new_kid) or string.find(new_kid, ':', 1, true) then return ff_err('invalid_kid') end
    if not ff_wp.is_hex(new_secret) then return ff_err('invalid_secret_hex') end
    local grace = tonumber(grace_arg)
    if not grace or grace ~= grace or grace < 0 or grace > MAX_SAFE_INT or grace ~= math.floor(grace) then
      return ff_err('invalid_grace_ms')
    end

    local current = redis.call('HGET', sec_key, 'current_kid')
    if current == new_kid then
      local stored = redis.call('HGET', sec_key, 'secret:' .. new_kid)
      if stored == new_secret then return ff_ok('noop', new_kid) end
      if stored then return ff_err('rotation_conflict', new_kid) end
      -- Torn earlier write: the kid was installed without its secret.
      redis.call('HSET', sec_key, 'secret:' .. new_kid, new_secret)
      return ff_ok('noop', new_kid)
    end

    local now = ff_now()
    -- Reap demoted kids whose grace has passed.
    local flat = redis.call('HGETALL', sec_key)
    local gc = 0
    for i = 1, #flat, 2 do
      local kid = string.match(flat[i], '^expires_at:(.*)$')
      if kid then
        local exp = tonumber(flat[i + 1])
        if not exp or exp <= 0 or exp < now then
          redis.call('HDEL', sec_key, flat[i], 'secret:' .. kid)
          gc = gc + 1
        end
      end
    end

    if ff_empty(current) then
      redis.call('HSET', sec_key, 'current_kid', new_kid, 'secret:' .. new_kid, new_secret)
      return ff_ok('rotated', '', new_kid, ff_int_text(gc))
    end
    local until_ms = ff_int_text(now + grace)
    redis.call('HSET', sec_key, 'previous_kid', current, 'previous_expires_at', until_ms,
      'expires_at:' .. current, until_ms, 'current_kid', new_kid, 'secret:' .. new_kid, new_secret)
    return ff_ok('rotated', current, new_kid, ff_int_text(gc))
  end)

  redis.register_function('ff_list_waitpoint_hmac_kids', function(keys, args)
    local sec_key = keys[1]
    local flat = redis.call('HGETALL', sec_key)
    local now = ff_now()
    local current = ''
    local out = {}
    for i = 1, #flat, 2 do
      local field, value = flat[i], flat[i + 1]
      if field == 'current_kid' then
        current = value
      else
        local kid = string.match(field, '^expires_at:(.*)$')
        local exp = kid and tonumber(value)
        if exp and exp > 0 and exp >= now then
          out[#out + 1] = kid
          out[#out + 1] = value
        end
      end
    end
    return {1, 'OK', current, ff_int_text(#out / 2), unpack(out)}
  end)

  -- Ours (not in the contract): the typed suspend of operations §6.2 — ff_suspend_execution plus a
  -- suspend idempotency key, several waitpoints and composite conditions. The contract function is
  -- unchanged; this one writes the same records (plus the fields named below), so every other contract
  -- function reads its suspensions as usual.
  -- KEYS (18 + 3N): 1..17 as ff_suspend_execution (8/9/15 = the primary waitpoint) · 18 suspend dedup
  --   key (ff:dedup:suspend:{fp:N}:<eid>:<key>) or NOOP · then per extra waitpoint W(x), W(x):signals,
  --   W(x):condition.
  -- ARGV (20 + 2N): 1..17 as ff_suspend_execution (15 use_pending must not be "1") · 18 idempotency_key
  --   ("" = none) · 19 dedup_ttl_ms · 20 N (extra waitpoints) · then N × (waitpoint_id, waitpoint_key).
  -- Condition (ARGV 12): the contract's (one waitpoint, N must be 0) or upstream v0.13's
  --   {"v":1,"composite":true,"tree":…} referencing every bound waitpoint key (ff_wp.tree_check). A composite
  --   writes upstream's composite condition (tree_json) on every W(x):condition, so the contract's
  --   ff_deliver_signal evaluates signals on any of them; it clears the satisfied set, seeds the member map
  --   and stores composite "1", composite_tree_json and additional_waitpoints_json on E:suspension:current.
  -- Replies: {1, "OK", suspension_id, waitpoint_id, waitpoint_key, token, N, N × (id, key, token)};
  --   a dedup hit replays the stored reply verbatim before anything else is read; invalid_input
  --   <detail> for malformed arguments; otherwise ff_suspend_execution's errors.
  suspend_typed = function(keys, args)
    -- KEYS 2, 3, 5, 6, 10, 12, 13, 16 are written by ff_suspend_release.
    local core_key, history_key, susp_key = keys[1], keys[4], keys[7]
    local waitpoints_key, sec_key, dedup_key = keys[14], keys[17], keys[18]
    local eid, attempt_index, attempt_id = args[1], args[2], args[3]
    local lease_id, lease_epoch, suspension_id = args[4], args[5], args[6]
    local reason_code, requested_by, timeout_at = args[9] or '', args[10] or '', args[11] or ''
    local condition_json, policy_json = args[12] or '', args[13] or ''
    local continuation, timeout_behavior = args[14] or '', args[16] or 'fail'
    local idem = args[18] or ''
    local n_extra = tonumber(args[20])
    if not n_extra or n_extra < 0 or n_extra ~= math.floor(n_extra) then
      return ff_err('invalid_input', 'additional_waitpoint_binding_malformed: N must be a whole number')
    end
    if #keys ~= 18 + 3 * n_extra or #args ~= 20 + 2 * n_extra then
      return ff_err('invalid_input', 'additional_waitpoint_binding_malformed: 3 KEYS and 2 ARGV per extra')
    end
    local maxlen = tonumber(args[17] or 1000)
    if not maxlen then return ff_err('invalid_input', 'lease_history_maxlen must be a number') end
    local dedup_ttl = 0
    if idem ~= '' then
      dedup_ttl = tonumber(args[19])
      if not dedup_ttl or dedup_ttl < 1 or ff_key.is_noop(dedup_key) then
        return ff_err('invalid_input', 'idempotency_key needs a dedup key and a positive dedup_ttl_ms')
      end
      dedup_ttl = math.floor(dedup_ttl)
      -- A repeat replays the first outcome before any state is read (no second suspension).
      local stored = redis.call('HGET', dedup_key, 'outcome')
      if stored then
        local out, start = {1}, 1
        while true do
          local tab = string.find(stored, '\t', start, true)
          if not tab then
            out[#out + 1] = string.sub(stored, start)
            return out
          end
          out[#out + 1] = string.sub(stored, start, tab - 1)
          start = tab + 1
        end
      end
    end
    if args[15] == '1' then return ff_err('invalid_input', 'use_pending: not supported by ff_suspend_typed') end

    local core, now, prev = ff_suspend_preamble(core_key, history_key, susp_key, lease_id, lease_epoch, attempt_id,
                                                attempt_index, maxlen)
    if core == nil then return now end  -- the refusal

    -- Everything is checked before the first write.
    local timeout_num = nil
    if timeout_at ~= '' then
      timeout_num = tonumber(timeout_at)
      if not timeout_num then return ff_err('invalid_input', 'timeout_at must be a number or empty') end
    end
    local bindings = {{id = args[7] or '', key = args[8] or '', wp = keys[8], cond = keys[15]}}
    for j = 1, n_extra do
      bindings[j + 1] = {id = args[19 + 2 * j] or '', key = args[20 + 2 * j] or '', wp = keys[16 + 3 * j],
        cond = keys[18 + 3 * j]}
    end
    local bound, bound_keys = {}, {}
    for _, b in ipairs(bindings) do
      if b.id == '' or b.key == '' then
        return ff_err('invalid_input', 'additional_waitpoint_binding_malformed: empty id or key')
      end
      if bound[b.id] or bound_keys[b.key] then
        return ff_err('invalid_input', 'additional_waitpoint_binding_malformed: repeated id or key')
      end
      bound[b.id], bound_keys[b.key] = true, true
    end
    local ok, c = pcall(cjson.decode, condition_json)
    if not ok or type(c) ~= 'table' then
      return ff_err('invalid_input', 'resume_condition_json must be a JSON object')
    end
    local composite = c.composite == true
    local tree, cond = nil, nil
    if composite then
      if c.v ~= 1 then return ff_err('invalid_input', 'composite: v must be 1') end
      tree = c.tree
      local seen = {}
      local e = ff_wp.tree_check(tree, 0, '', bound_keys, seen)
      if e then return ff_err('invalid_input', e) end
      for _, b in ipairs(bindings) do
        if not seen[b.key] then return ff_err('invalid_input', 'extra_binding_not_referenced_by_condition') end
      end
      -- Every waitpoint's condition hash carries upstream's composite marker and the tree, so the
      -- contract's ff_deliver_signal evaluates a signal on any of them.
      cond = {condition_type = 'composite', composite = '1', match_mode = 'composite', minimum_signal_count = 1,
        total_matchers = 0, satisfied_count = 0, closed = '0', updated_at = now, tree_json = cjson.encode(tree)}
    else
      if n_extra > 0 then return ff_err('invalid_input', 'additional waitpoints need a composite condition') end
      cond = ff_wp.new_condition(condition_json, now)
    end
    for _, b in ipairs(bindings) do
      local code
      b.token, code = ff_wp.mint(sec_key, b.id, b.key, now)
      if not b.token then return ff_err(code) end
    end

    if prev then
      if not ff_empty(prev[2]) then redis.call('SADD', waitpoints_key, prev[2]) end
      redis.call('DEL', susp_key)
    end
    local extras = {}
    for j, b in ipairs(bindings) do
      redis.call('HSET', b.wp, 'waitpoint_id', b.id, 'execution_id', eid, 'attempt_index', attempt_index,
        'suspension_id', suspension_id, 'waitpoint_key', b.key, 'waitpoint_token', b.token, 'state', 'active',
        'created_at', now, 'activated_at', now, 'expires_at', timeout_at, 'signal_count', '0',
        'matched_signal_count', '0', 'last_signal_at', '')
      redis.call('DEL', b.cond)
      if cond then ff_hset(b.cond, cond) end
      redis.call('SADD', waitpoints_key, b.id)
      if j > 1 then extras[#extras + 1] = {waitpoint_id = b.id, waitpoint_key = b.key} end
    end
    local set_key = susp_key .. ':satisfied_set'
    redis.call('DEL', set_key, set_key .. ':signals', susp_key .. ':member_map')
    if composite then
      local map = ff_wp.member_map(tree)
      if #map > 0 then redis.call('HSET', susp_key .. ':member_map', unpack(map)) end
    end
    local primary = bindings[1]
    ff_suspend_release(keys, core, now, maxlen, {
      eid = eid, attempt_index = attempt_index, suspension_id = suspension_id, waitpoint_id = primary.id,
      waitpoint_key = primary.key, reason_code = reason_code, requested_by = requested_by,
      timeout_at = timeout_at, timeout_num = timeout_num, timeout_behavior = timeout_behavior,
      condition_json = condition_json, policy_json = policy_json, continuation = continuation,
    }, {
      'additional_waitpoints_json', #extras > 0 and cjson.encode(extras) or '[]',
      'composite', composite and '1' or '0', 'composite_tree_json', composite and cond.tree_json or '',
      'idempotency_key', idem,
    })

    local out = {1, 'OK', suspension_id, primary.id, primary.key, primary.token, ff_int_text(n_extra)}
    for j = 2, #bindings do
      local b = bindings[j]
      out[#out + 1], out[#out + 2], out[#out + 3] = b.id, b.key, b.token
    end
    if idem ~= '' then
      local parts = {}
      for i = 2, #out do parts[#parts + 1] = tostring(out[i]) end
      redis.call('HSET', dedup_key, 'outcome', table.concat(parts, '\t'))
      redis.call('PEXPIRE', dedup_key, dedup_ttl)
    end
    return out
  end
  redis.register_function('ff_suspend_typed', suspend_typed)
end

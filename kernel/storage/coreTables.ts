import type { Generated } from 'kysely'

/**
 * The kernel's own tables: what authentication, ACL, rate limits and the call log
 * need. Plugins may query them through the kernel's Kysely handle (they are part of
 * the kernel contract); a plugin's own tables are declared in the plugin.
 * Times are stored as epoch milliseconds, so both engines compare them the same way.
 */
export interface CoreTables {
  api_acl: {
    id: Generated<number>
    path: string
    display_name: string
    is_public: number
    require_https: number
    require_hash: number
  }
  api_groups: {
    id: Generated<number>
    display_name: string
  }
  api_group_acl: {
    group_id: number
    acl_id: number
  }
  api_keys: {
    id: Generated<number>
    api_key: string
    /** AES-256-GCM under the master key (D9); never the plaintext. */
    secret_enc: string
    display_name: string
    parent: number
    custno: number
    email: string | null
    phone: string | null
    start_date: number | null
    end_date: number | null
    day_pass: Generated<number>
    require_https: Generated<number>
    allow_hours: number | null
    response_format: Generated<string>
    log_level: Generated<number>
    log_raw: Generated<number>
    max_hits: string | null
    require_hash: number | null
    created_by: number | null
    created_at: number
    updated_at: number
    /** The secret before the last rotation, sealed like secret_enc, valid until prev_secret_ends (issue 16). */
    prev_secret_enc: string | null
    prev_secret_ends: number | null
    /** Calls left (issue 16); null = unlimited. Spent in the database by one atomic statement per call (limits/credits.ts). */
    credits: Generated<number | null>
    /** The Refill: `credits` becomes refill_amount at refill_at, then every refill_every ('1Day' | '1Mon', UTC). */
    refill_amount: Generated<number | null>
    refill_every: Generated<string | null>
    refill_at: Generated<number | null>
    /** The count as last set (Credits, AddCredits' total, a refill's Amount) and when: what 80 % of credits without a Refill is of (issue 17). */
    credits_set: Generated<number | null>
    credits_set_at: Generated<number | null>
  }
  /** One administrative change (issue 16 item 4), written in the change's own transaction. */
  api_audit: {
    id: Generated<number>
    at: number
    /** The key that made the change; null: the operator on the server. */
    who_key_id: number | null
    /** The tenant whose object changed (the records a tenant's administrator may read). */
    parent: number
    custno: number
    action: string
    /** The changed key, when a key changed. */
    key_id: number | null
    /** JSON of the changed fields before and after; never a secret. */
    before: string | null
    after: string | null
    request_id: number | null
  }
  api_key_groups: {
    key_id: number
    group_id: number
  }
  api_log: {
    id: number
    key_id: number | null
    request_time: number
    http_host: string | null
    server_name: string | null
    server_addr: string | null
    server_port: number | null
    remote_addr: string | null
    request_scheme: string | null
    request_method: string
    api_acl: number | null
    api_function: string
    request_url: string | null
    http_user_agent: string | null
    raw_request: string | null
    response_code: number
    response: string | null
    response_format: string | null
    seconds: number
    bandwidth: number
    /** After this time the detail columns are cleared (D8 retention). */
    detail_until: number
    /** Which secret signed the call: 'current', 'previous' (during a rotation's overlap) or null. */
    signed_with: string | null
    /** A level-2 answer served from the response cache: `response` is null and its text is in api_log_body. */
    response_digest: string | null
  }
  /** Answers logged at level 2 kept once by their digest, while any record may still show them. */
  api_log_body: {
    digest: string
    body: string
    /** The latest detail_until of a record that names it: deleted after it. */
    keep_until: number
  }
  /** Signatures of writes already made (without Redis: auth/usedSignatures.ts), until they could no longer pass their window. */
  api_used_signatures: {
    key_id: number
    /** The x-apihmac value, lower-cased hex (at most 128 characters: sha512). */
    signature: string
    expires_at: number
  }
  /** Stored answers of writes sent with an Idempotency-Key (status 0: still running). */
  api_idempotency: {
    key_id: number
    idem_key: string
    request_hash: string
    status: number
    content_type: string | null
    headers: string | null
    /** base64 of the answer's bytes */
    body: string | null
    created_at: number
  }
  kernel_settings: {
    name: string
    value: string
  }
  /** Cache partitions changed by some process, for the others on the database without Redis (cluster/partitionChanges.ts). */
  kernel_partition_changes: {
    id: Generated<number>
    name: string
    changed: number
  }
  /** The node registry (D16): one row per node id a live (or lately dead) process holds. */
  kernel_nodes: {
    node_id: number
    /** Random per process: whose row it is, so a successor's takeover is noticed. */
    instance_token: string
    server_name: string
    server_addr: string | null
    /** Null until the process listens (the operator CLI never does, and is no server). */
    server_port: number | null
    version: string
    started: number
    last_seen: number
  }
  /** A tenant's entitlement (D14), set by the operator; null = unlimited / the default zone. */
  tenant_entitlements: {
    parent: number
    /** 0: the whole parent (every customer of it together). */
    custno: number
    max_keys: number | null
    max_people: number | null
    max_players: number | null
    time_zone: string | null
    updated_at: number
    /** The tenant-wide MaxHits (D7 grammar, issue 16): every call of every key of the tenant counts. */
    max_hits: Generated<string | null>
  }
  /** Display players (D14): a screen of a tenant and the key it calls with. */
  tenant_players: {
    id: Generated<number>
    parent: number
    custno: number
    name: string
    disp_group: string | null
    location: string | null
    key_id: number
    last_seen: number | null
    created_at: number
  }
}

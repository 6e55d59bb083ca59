/**
 * Column names of api_keys as the API spells them (interface 2.1; issue 16 for credits):
 * what an event names as changed (events/keyEvents.ts) and how an audit record shows a
 * key's fields (audit/auditFields.ts). `groups` is the key's group ids (GroupId).
 */
export const keyApiFields: Readonly<Record<string, string>> = {
  display_name: 'Display_Name', email: 'Email', phone: 'Phone', start_date: 'StartDate', end_date: 'EndDate',
  day_pass: 'DayPass', require_https: 'Require_Https', allow_hours: 'AllowHours', response_format: 'ResponseFormat',
  log_level: 'LogLevel', log_raw: 'LogRaw', max_hits: 'MaxHits', require_hash: 'Require_Hash', parent: 'Parent',
  custno: 'Custno', credits: 'Credits', refill_amount: 'Refill', refill_every: 'Refill', groups: 'GroupId',
}

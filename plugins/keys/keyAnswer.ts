/** The answer of create and edit (interface 4.1, 4.2). */
export interface KeyAnswer {
  Id: number
  Api_Key: string
  Api_Secret: string
  Name: string
  /** Canonical MaxHits (D7); an empty string when the key has no limit. */
  MaxHits: string
}

export function keyAnswer(id: number, apiKey: string, secret: string, name: string, maxHits: string | null): KeyAnswer {
  return { Id: id, Api_Key: apiKey, Api_Secret: secret, Name: name, MaxHits: maxHits ?? '' }
}


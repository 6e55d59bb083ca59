/**
 * An answer that is not a value to encode as json/xml/csv but bytes of its own type
 * (an HTML page, an RSS feed, a script): a handler returns one and the encoder sends it
 * as it is, whatever format the caller asked for. Extra headers go through `call.setHeader`.
 */
export class RawAnswer {
  readonly body: Buffer
  constructor(
    readonly contentType: string,
    body: Buffer | string,
  ) {
    this.body = typeof body === 'string' ? Buffer.from(body) : body
  }

  /** What a level-2 call log keeps of it: its type and size, not megabytes of bytes as JSON. */
  toJSON(): { ContentType: string; Bytes: number } {
    return { ContentType: this.contentType, Bytes: this.body.length }
  }
}

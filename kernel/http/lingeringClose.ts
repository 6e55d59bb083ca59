import type { IncomingMessage } from 'node:http'

/** How long a connection closed with an unread body goes on reading (and dropping) what the client sends. */
export const lingerMs = 1000
/** How much it reads at most: the largest body a default route takes (a photo, 8 MiB). */
export const lingerBytes = 8 * 1024 * 1024

/** Set on a request once it lingers (a mark on the request itself: no module-wide state). */
const lingering = Symbol('lingering')

/**
 * A lingering close, as nginx and Apache do. A call answered before its body was read
 * closes its connection (closeUnreadStage); node:http would destroy the socket as soon
 * as the answer is written, and the bytes the client is still sending then make the
 * kernel reset the connection: the client gets EPIPE or ECONNRESET, not the refusal.
 * Instead the answer goes out with a FIN, and what the client still sends is read and
 * dropped, never kept, until its body has ended, `lingerBytes` have arrived or `lingerMs`
 * has passed, whichever comes first; then the socket is destroyed.
 *
 * Called before the answer is written: the request must flow by then, or node:http
 * dumps it and no byte would be counted.
 */
export function lingerOnClose(request: IncomingMessage): void {
  // Once per request: a 404 with a body is set lingering before its pipeline runs, and checked again after it.
  const marked = request as IncomingMessage & { [lingering]?: true }
  if (marked[lingering]) return
  marked[lingering] = true
  const socket = request.socket
  let dropped = 0
  let timer: NodeJS.Timeout | undefined
  const close = () => {
    clearTimeout(timer)
    socket.destroy()
  }
  request.on('data', (chunk: Buffer) => {
    dropped += chunk.length
    if (dropped > lingerBytes) close()
  })
  request.resume()
  // node:http ends a connection whose answer says close with socket.destroySoon() (a FIN,
  // then destroy once written); this socket's replacement keeps reading after the FIN.
  socket.destroySoon = () => {
    if (socket.writable) socket.end()
    timer = setTimeout(close, lingerMs).unref()
    // Nothing more to read once the body has ended or the client has closed its side,
    // but the answer must have been written before the socket goes.
    const settle = () => {
      if (socket.writableFinished && (request.complete || socket.readableEnded)) close()
    }
    request.once('end', settle)
    socket.once('end', settle)
    socket.once('finish', settle)
    socket.once('close', () => clearTimeout(timer))
    settle()
  }
}

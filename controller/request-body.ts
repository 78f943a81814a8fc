/**
 * Request bodies read with a bound: past the limit nothing more is kept and the request is answered
 * 413, in a way the client can read (see `refuseTooLarge`).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';

/** How much of a refused body is read and dropped so the client sees the 413, not a reset. */
const DRAIN_CAP = 16 * 1024 * 1024;

/**
 * Answers 413 at once and closes the connection once the rest of the body has been read and
 * dropped (up to DRAIN_CAP): a client still writing its body then reads the 413 instead of
 * a connection reset.
 */
export function refuseTooLarge(req: IncomingMessage, res: ServerResponse, limit: number): void {
  const text = JSON.stringify({ error: `the body is larger than ${limit} bytes` }) + '\n';
  res.writeHead(413, {
    'content-type': 'application/json',
    'content-length': String(Buffer.byteLength(text)),
    connection: 'close',
  });
  res.write(text);
  let dropped = 0;
  const done = () => {
    req.off('data', drop);
    if (!res.writableEnded) res.end();
  };
  const drop = (chunk: Buffer) => {
    dropped += chunk.length;
    if (dropped > DRAIN_CAP) done();
  };
  if (req.complete) return done();
  req.on('data', drop).once('end', done);
}

/** The request's body; undefined when it was larger than `limit` (then answered 413) or aborted. */
export function readBody(
  req: IncomingMessage,
  res: ServerResponse,
  limit: number,
): Promise<Buffer | undefined> {
  if (Number(req.headers['content-length']) > limit) {
    refuseTooLarge(req, res, limit);
    return Promise.resolve(undefined);
  }
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const onEnd = () => resolve(Buffer.concat(chunks));
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size <= limit) return void chunks.push(chunk);
      req.off('data', onData).off('end', onEnd);
      refuseTooLarge(req, res, limit);
      resolve(undefined);
    };
    req.on('data', onData).once('end', onEnd).once('error', reject);
    req.once('close', () => resolve(undefined));
  });
}

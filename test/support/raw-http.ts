import http from 'node:http';
import net from 'node:net';
import type { Express } from 'express';

/** A real server on a free local port, for clients that write raw bytes. */
export async function listen(app: Express): Promise<{ port: number; close(): Promise<void> }> {
  const server = http.createServer(app);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  return {
    port,
    close: () => {
      server.closeAllConnections();
      return new Promise((resolve) => server.close(() => resolve()));
    },
  };
}

export interface RawAnswer {
  status: number;
  headers: Record<string, string>;
  body: unknown;
}

/**
 * A client that writes what it is given and no more: a request's head and the first bytes of its
 * body, say, then waits. `next()` resolves to each answer as it arrives on the connection (a
 * keep-alive connection may carry several); `closed` resolves once the server closed it.
 */
export function rawClient(port: number): { write(bytes: string | Buffer): void; next(): Promise<RawAnswer>; closed: Promise<void>; destroy(): void } {
  const socket = net.connect(port, '127.0.0.1');
  let buffer = Buffer.alloc(0);
  const answers: RawAnswer[] = [];
  const waiting: ((answer: RawAnswer) => void)[] = [];
  const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
  socket.on('error', () => {}); // a reset after the answer is the server's right
  socket.on('data', (chunk: Buffer) => {
    buffer = Buffer.concat([buffer, chunk]);
    for (;;) {
      const end = buffer.indexOf('\r\n\r\n');
      if (end === -1) return;
      const [statusLine, ...lines] = buffer.subarray(0, end).toString('latin1').split('\r\n');
      const headers = Object.fromEntries(lines.map((line) => [line.slice(0, line.indexOf(':')).toLowerCase(), line.slice(line.indexOf(':') + 1).trim()]));
      const length = Number(headers['content-length'] ?? 0);
      if (buffer.length < end + 4 + length) return;
      const text = buffer.subarray(end + 4, end + 4 + length).toString('utf8');
      buffer = buffer.subarray(end + 4 + length);
      const answer = { status: Number(statusLine!.split(' ')[1]), headers, body: text === '' ? undefined : (JSON.parse(text) as unknown) };
      const waiter = waiting.shift();
      if (waiter === undefined) answers.push(answer);
      else waiter(answer);
    }
  });
  return {
    write: (bytes) => void socket.write(bytes),
    next: () => {
      const answer = answers.shift();
      return answer === undefined ? new Promise((resolve) => waiting.push(resolve)) : Promise.resolve(answer);
    },
    closed,
    destroy: () => socket.destroy(),
  };
}

/** The head of a JSON POST declaring `length` bytes of body. */
export function postHead(path: string, length: number, headers: Record<string, string> = {}): string {
  const extra = Object.entries(headers)
    .map(([name, value]) => `${name}: ${value}\r\n`)
    .join('');
  return `POST ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: ${length}\r\n${extra}\r\n`;
}

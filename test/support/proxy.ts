import net from 'node:net';

/** The frontend's Sync message: `S` and its length, 4. */
const SYNC = Buffer.from([0x53, 0, 0, 0, 4]);
const endsWithSync = (chunk: Buffer): boolean => chunk.length >= SYNC.length && chunk.subarray(chunk.length - SYNC.length).equals(SYNC);
/** Whether the frontend messages in `chunk` are of the extended protocol (Parse, Bind, Execute), whose Sync commits them. */
function awaitsSync(chunk: Buffer): boolean {
  for (let at = 0; at + 5 <= chunk.length; at += 1 + chunk.readInt32BE(at + 1)) {
    if (chunk[at] === 0x50 || chunk[at] === 0x42 || chunk[at] === 0x45) return true; // P, B, E
  }
  return false;
}

/**
 * A TCP proxy in front of a database: `stop()` is the database going away (every connection cut,
 * nothing listening), `start()` is it coming back, on the same port; `reset()` cuts every
 * connection and keeps listening; `cutAfter(text)` lets one statement through and loses its answer.
 */
export class TcpProxy {
  private server: net.Server | undefined;
  private readonly sockets = new Set<net.Socket>();
  private trap: { pattern: Buffer; sprung: () => void } | undefined;

  private constructor(
    readonly port: number,
    private readonly target: { host: string; port: number },
  ) {}

  /** Reserves a free port; nothing listens on it until start(). */
  static async reserve(target: { host: string; port: number }): Promise<TcpProxy> {
    const probe = net.createServer();
    await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
    const { port } = probe.address() as net.AddressInfo;
    await new Promise((resolve) => probe.close(resolve));
    return new TcpProxy(port, target);
  }

  async start(): Promise<void> {
    this.server = net.createServer((client) => {
      const upstream = net.connect(this.target.port, this.target.host);
      for (const socket of [client, upstream]) {
        this.sockets.add(socket);
        socket.on('close', () => this.sockets.delete(socket));
        socket.on('error', () => socket.destroy());
      }
      client.pipe(upstream).pipe(client);
      let trapped = false;
      let cut: (() => void) | undefined;
      // After pipe's own listener: the chunk is on its way to the database when this runs.
      client.on('data', (chunk: Buffer) => {
        if (cut !== undefined) return void (endsWithSync(chunk) && cut());
        const trap = this.trap;
        if (trap === undefined || !chunk.includes(trap.pattern)) return;
        this.trap = undefined;
        trapped = true;
        upstream.unpipe(client); // its answer never reaches the client
        cut = (): void => {
          cut = () => {};
          upstream.end(); // the database reads the statement to its end, runs it, then finds the connection closed
          client.destroy();
          trap.sprung();
        };
        // A statement with parameters is Parse, Bind, Execute, then Sync, which commits it: when the
        // Sync comes in a later chunk, wait for it, or the database would roll the statement back.
        if (endsWithSync(chunk) || !awaitsSync(chunk)) cut();
      });
      client.on('close', () => trapped || upstream.destroy());
      upstream.on('close', () => client.destroy());
    });
    await new Promise<void>((resolve) => this.server!.listen(this.port, '127.0.0.1', resolve));
  }

  /** A database that accepts connections and then never answers (a hung server, a dropped route). */
  async hang(): Promise<void> {
    this.server = net.createServer((client) => {
      this.sockets.add(client);
      client.on('close', () => this.sockets.delete(client));
      client.on('error', () => client.destroy());
      client.resume(); // read and drop whatever is sent
    });
    await new Promise<void>((resolve) => this.server!.listen(this.port, '127.0.0.1', resolve));
  }

  /**
   * The next bytes a client sends that hold `text` (a statement's SQL, `COMMIT;`) reach the
   * database, which runs them; then the connection is cut before their answer comes back: a write
   * whose outcome the client cannot know. Resolves once it happened.
   */
  cutAfter(text: string): Promise<void> {
    return new Promise((sprung) => (this.trap = { pattern: Buffer.from(text), sprung }));
  }

  /** Every connection cut at once while the port keeps accepting new ones: a server restart, as clients see it. */
  reset(): void {
    for (const socket of this.sockets) socket.destroy();
  }

  async stop(): Promise<void> {
    for (const socket of this.sockets) socket.destroy();
    if (this.server) await new Promise((resolve) => this.server!.close(resolve));
    this.server = undefined;
  }
}

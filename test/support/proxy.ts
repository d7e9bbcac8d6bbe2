import net from 'node:net';

/**
 * A TCP proxy in front of a database: `stop()` is the database going away (every connection cut,
 * nothing listening), `start()` is it coming back, on the same port; `reset()` cuts every
 * connection and keeps listening.
 */
export class TcpProxy {
  private server: net.Server | undefined;
  private readonly sockets = new Set<net.Socket>();

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
      client.on('close', () => upstream.destroy());
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

/**
 * The channel between the service and an isolate: length-prefixed JSON frames on a pipe (the
 * isolate's fd 3), in place of Node's IPC channel. Node's channel buffers a message until its
 * newline with no cap, then parses it whole on the service's thread: an isolate that writes a
 * message of hundreds of MB (or no newline at all) could make the service hold and parse all of
 * it. Here each frame says its length first, a frame longer than the receiver's cap is refused
 * on its four-byte header, before a byte of it is kept, and what is buffered is at most one frame.
 *
 * A frame: its length in bytes (an unsigned 32-bit big-endian integer), then that many bytes of
 * UTF-8 JSON. The pipe is a socket pair (libuv makes stdio pipes so), read and written both ways.
 */
import { performance } from 'node:perf_hooks';
import type { Duplex } from 'node:stream';

/** The frame's length, before it. */
const HEADER_BYTES = 4;
/** The largest length a header can say. */
export const MAX_FRAME_BYTES = 0xffff_ffff;

/** The file descriptor of the channel in an isolate (stdio: stdin, stdout, stderr, then it). */
export const CHANNEL_FD = 3;
/** The isolate's argument that names the service's descriptors it inherited, to close (`--close-fds=5,100`). */
export const CLOSE_FDS = '--close-fds=';

export interface ChannelOptions<In> {
  /** The largest frame taken; the header of a longer one is a fault. */
  maxFrameBytes: number;
  /**
   * The most written and not yet taken by the other side when more is written; past it, a fault
   * (the other side is not reading, and what the service writes to it would pile up in the
   * service's memory). Unset: no cap.
   */
  maxBacklogBytes?: number;
  /** Each message, in order. */
  receive(message: In): void;
  /** The other side broke the channel's rules (a frame past the cap, a frame that is not JSON, a backlog past the cap); nothing more is read. */
  fault(reason: string): void;
  /** The other side closed its end (it ended, or the service let go of it). */
  closed?(): void;
  /**
   * The most milliseconds a second spent parsing and handling what the other side sent: past it,
   * reading stops until the second is over (the other side's writes wait in its own memory).
   * A frame within the cap may still take a while to parse (15 MB of small objects: about 130 ms
   * here), and a side that sent such frames back to back would keep the receiver's thread busy
   * with nothing else. Unset: no budget.
   */
  busyMsPerSecond?: number;
}

/** One end of a channel: frames out, frames in. */
export class Channel<In, Out> {
  /** The start of a frame not whole yet: its chunks, and how many bytes they hold. */
  private parts: Buffer[] = [];
  private partBytes = 0;
  /** The length of the frame begun, once its header is in (-1 before). */
  private frameBytes = -1;
  private faulted = false;
  /** The cap on frames taken; the isolate's end learns it when its extension loads. */
  maxFrameBytes: number;
  /** The second the busy time counts in (ms, performance.now()), and the time spent in it. */
  private second = -Infinity;
  private busyMs = 0;
  /** Bytes read and not handled yet, past the busy budget: handled when reading resumes. */
  private held: Buffer | undefined;
  /** Set while reading is stopped for the rest of the second. */
  private resumes: NodeJS.Timeout | undefined;
  /** How many times reading stopped for the busy budget. */
  rests = 0;

  constructor(
    private readonly stream: Duplex,
    private readonly options: ChannelOptions<In>,
  ) {
    this.maxFrameBytes = options.maxFrameBytes;
    stream.on('data', this.take);
    stream.on('error', () => stream.destroy());
    stream.once('close', () => options.closed?.());
  }

  /**
   * The frame of `message`, or undefined when it is longer than `limit` (the other side's cap):
   * then nothing is sent, and the sender decides what goes instead. Throws what JSON.stringify
   * throws (a circular value, a BigInt).
   */
  encode(message: Out, limit = MAX_FRAME_BYTES): Buffer | undefined {
    const text = JSON.stringify(message);
    const length = Buffer.byteLength(text);
    if (length > limit) return undefined;
    const frame = Buffer.allocUnsafe(HEADER_BYTES + length);
    frame.writeUInt32BE(length, 0);
    frame.write(text, HEADER_BYTES, 'utf8');
    return frame;
  }

  /** Writes frames made by `encode`, in one write. */
  write(frame: Buffer): void {
    if (this.faulted || this.stream.destroyed) return;
    // What the other side has not taken of earlier writes (a large frame on its own is not a fault).
    const { maxBacklogBytes } = this.options;
    if (maxBacklogBytes !== undefined && this.stream.writableLength > maxBacklogBytes) {
      this.fail(`it left ${this.stream.writableLength} bytes unread, past the cap of ${maxBacklogBytes}`);
      return;
    }
    this.stream.write(frame);
  }

  /** Encodes and writes one message; false when it is over `limit` (nothing is sent). */
  send(message: Out, limit?: number): boolean {
    const frame = this.encode(message, limit);
    if (frame === undefined) return false;
    this.write(frame);
    return true;
  }

  /** Stops reading and writing. */
  close(): void {
    this.faulted = true;
    this.parts = [];
    this.partBytes = 0;
    this.held = undefined;
    clearTimeout(this.resumes);
    this.stream.destroy();
  }

  /** Bytes read: whole frames are handed on as they complete, the start of the next is kept. */
  private readonly take = (chunk: Buffer): void => {
    if (this.faulted) return;
    if (this.resumes !== undefined) {
      this.rest(chunk);
      return;
    }
    let data = chunk;
    if (this.partBytes > 0) {
      if (this.frameBytes === -1) {
        // A header split across reads: joined, then read below like any chunk.
        this.parts.push(chunk);
        this.partBytes += chunk.length;
        if (this.partBytes < HEADER_BYTES) return;
        data = Buffer.concat(this.parts, this.partBytes);
        this.parts = [];
        this.partBytes = 0;
      } else {
        const missing = HEADER_BYTES + this.frameBytes - this.partBytes;
        if (chunk.length < missing) {
          this.parts.push(chunk);
          this.partBytes += chunk.length;
          return;
        }
        this.parts.push(chunk.subarray(0, missing));
        const frame = Buffer.concat(this.parts, this.partBytes + missing);
        this.parts = [];
        this.partBytes = 0;
        this.frameBytes = -1;
        if (!this.deliver(frame, HEADER_BYTES, frame.length)) return;
        data = chunk.subarray(missing);
        if (this.spent()) {
          if (data.length > 0) this.rest(data);
          return;
        }
      }
    }
    let offset = 0;
    while (offset < data.length) {
      const left = data.length - offset;
      if (left < HEADER_BYTES) {
        this.keep(data.subarray(offset), -1);
        return;
      }
      const length = data.readUInt32BE(offset);
      if (length > this.maxFrameBytes) {
        this.fail(`it sent a message of ${length} bytes, past the cap of ${this.maxFrameBytes}`);
        return;
      }
      if (left - HEADER_BYTES < length) {
        this.keep(data.subarray(offset), length);
        return;
      }
      if (!this.deliver(data, offset + HEADER_BYTES, offset + HEADER_BYTES + length)) return;
      offset += HEADER_BYTES + length;
      if (this.spent() && offset < data.length) {
        this.rest(data.subarray(offset));
        return;
      }
    }
    this.spent();
  };

  /** Whether the second's busy budget is spent; if so, reading stops until the second is over. */
  private spent(): boolean {
    const { busyMsPerSecond } = this.options;
    if (busyMsPerSecond === undefined || this.busyMs <= busyMsPerSecond || this.faulted) return false;
    if (this.resumes === undefined) {
      this.rests++;
      this.stream.pause();
      this.resumes = setTimeout(this.wake, Math.max(1, Math.ceil(this.second + 1000 - performance.now())));
      this.resumes.unref?.();
    }
    return true;
  }

  /** Keeps the rest of a chunk, read past the budget, for when reading resumes. */
  private rest(data: Buffer): void {
    this.held = this.held === undefined ? data : Buffer.concat([this.held, data]);
  }

  /** The second is over: what was held is handled, then reading resumes (unless the budget is spent again). */
  private readonly wake = (): void => {
    this.resumes = undefined;
    if (this.faulted) return;
    const held = this.held;
    this.held = undefined;
    if (held !== undefined) this.take(held);
    // Spent again on what was held: a new wake is set.
    if (this.resumes === undefined && !this.faulted) this.stream.resume();
  };

  private keep(part: Buffer, frameBytes: number): void {
    this.parts.push(part);
    this.partBytes = part.length;
    this.frameBytes = frameBytes;
  }

  /** Parses one frame and hands it on; false once the channel is faulted or closed. */
  private deliver(data: Buffer, start: number, end: number): boolean {
    const started = performance.now();
    if (started - this.second >= 1000) {
      this.second = started;
      this.busyMs = 0;
    }
    let message: In;
    try {
      message = JSON.parse(data.toString('utf8', start, end)) as In;
    } catch {
      this.fail('it sent a message that is not JSON');
      return false;
    }
    this.options.receive(message);
    this.busyMs += performance.now() - started;
    return !this.faulted;
  }

  private fail(reason: string): void {
    if (this.faulted) return;
    this.close();
    this.options.fault(reason);
  }
}

// Minimal protobuf wire-format writer and reader, enough for ONNX's ModelProto.

export class ProtoWriter {
  private buf = new Uint8Array(1024);
  private len = 0;

  private ensure(n: number): void {
    if (this.len + n <= this.buf.length) return;
    let cap = this.buf.length * 2;
    while (cap < this.len + n) cap *= 2;
    const b = new Uint8Array(cap);
    b.set(this.buf.subarray(0, this.len));
    this.buf = b;
  }

  private varint(v: bigint): void {
    // Negative int64 values are written as their 64-bit two's complement (10 bytes).
    let x = BigInt.asUintN(64, v);
    this.ensure(10);
    while (x >= 0x80n) {
      this.buf[this.len++] = Number(x & 0x7fn) | 0x80;
      x >>= 7n;
    }
    this.buf[this.len++] = Number(x);
  }

  private tag(field: number, wire: number): void {
    this.varint(BigInt((field << 3) | wire));
  }

  int(field: number, v: number | bigint): this {
    this.tag(field, 0);
    this.varint(BigInt(v));
    return this;
  }

  float(field: number, v: number): this {
    this.tag(field, 5);
    this.ensure(4);
    new DataView(this.buf.buffer, this.buf.byteOffset + this.len, 4).setFloat32(0, v, true);
    this.len += 4;
    return this;
  }

  bytes(field: number, b: Uint8Array): this {
    this.tag(field, 2);
    this.varint(BigInt(b.length));
    this.ensure(b.length);
    this.buf.set(b, this.len);
    this.len += b.length;
    return this;
  }

  string(field: number, s: string): this {
    return this.bytes(field, new TextEncoder().encode(s));
  }

  message(field: number, build: (w: ProtoWriter) => void): this {
    const w = new ProtoWriter();
    build(w);
    return this.bytes(field, w.finish());
  }

  /** Packed repeated int64. */
  packedInts(field: number, vs: readonly number[]): this {
    const w = new ProtoWriter();
    for (const v of vs) w.varint(BigInt(v));
    return this.bytes(field, w.finish());
  }

  /** Packed repeated float. */
  packedFloats(field: number, vs: readonly number[]): this {
    const b = new Uint8Array(vs.length * 4);
    const dv = new DataView(b.buffer);
    vs.forEach((v, i) => dv.setFloat32(i * 4, v, true));
    return this.bytes(field, b);
  }

  finish(): Uint8Array {
    return this.buf.slice(0, this.len);
  }
}

export type ProtoField = { field: number; wire: number; value: bigint | Uint8Array };

/** Reads the top-level fields of one message (no schema: length-delimited values stay bytes). */
export function readFields(b: Uint8Array): ProtoField[] {
  const out: ProtoField[] = [];
  let p = 0;
  const varint = (): bigint => {
    let r = 0n;
    let shift = 0n;
    for (;;) {
      if (p >= b.length) throw new Error('protobuf: truncated varint');
      const c = b[p++]!;
      r |= BigInt(c & 0x7f) << shift;
      if (!(c & 0x80)) return r;
      shift += 7n;
      if (shift > 63n) throw new Error('protobuf: varint too long');
    }
  };
  while (p < b.length) {
    const key = Number(varint());
    const field = key >> 3;
    const wire = key & 7;
    if (wire === 0) out.push({ field, wire, value: varint() });
    else if (wire === 2) {
      const n = Number(varint());
      if (p + n > b.length) throw new Error('protobuf: truncated field');
      out.push({ field, wire, value: b.subarray(p, p + n) });
      p += n;
    } else if (wire === 5) {
      out.push({ field, wire, value: b.subarray(p, p + 4) });
      p += 4;
    } else if (wire === 1) {
      out.push({ field, wire, value: b.subarray(p, p + 8) });
      p += 8;
    } else throw new Error(`protobuf: unsupported wire type ${wire}`);
  }
  return out;
}

// roslib's transport over the `ws` package, whatever the Node version: roslib picks Node's own WebSocket where one
// exists (Node 22), whose failed reconnects to a restarted rosbridge server never come back up; `ws` behaves the same
// on every Node the project supports.
import { AbstractTransport, type ITransport, type ITransportFactory } from 'roslib';
import { WebSocket } from 'ws';

class WsTransport extends AbstractTransport {
  constructor(private readonly socket: WebSocket) {
    super();
    socket.binaryType = 'arraybuffer';
    socket.on('open', (e: unknown) => this.emit('open', e));
    socket.on('close', (e: unknown) => this.emit('close', e));
    socket.on('error', (e: unknown) => this.emit('error', e));
    socket.on('message', (data: unknown, isBinary: boolean) => this.handleRawMessage(isBinary ? data : String(data)));
  }
  send(message: Parameters<ITransport['send']>[0]): void {
    this.socket.send(JSON.stringify(message));
  }
  close(): void {
    this.socket.close();
  }
  isConnecting(): boolean {
    return this.socket.readyState === WebSocket.CONNECTING;
  }
  isOpen(): boolean {
    return this.socket.readyState === WebSocket.OPEN;
  }
  isClosing(): boolean {
    return this.socket.readyState === WebSocket.CLOSING;
  }
  isClosed(): boolean {
    return this.socket.readyState === WebSocket.CLOSED;
  }
}

export const wsTransportFactory: ITransportFactory = async (url) => new WsTransport(new WebSocket(url));

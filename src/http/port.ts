// A port in use, said in one line before anything starts: `npm start` (main.ts, PORT) and
// `npm run demo` (scripts/demo.ts, DEMO_PORT) ask whether their port is free before they open a
// database or touch a folder, and say which setting to change when it is not.
import net from 'node:net';

/** Whether `port` on `host` is taken (EADDRINUSE); port 0 (any free one) never is. Other errors throw. */
export async function portInUse(host: string, port: number): Promise<boolean> {
  if (port === 0) return false;
  return new Promise<boolean>((resolve, reject) => {
    const probe = net.createServer();
    probe.unref();
    probe.once('error', (e: NodeJS.ErrnoException) => (e.code === 'EADDRINUSE' ? resolve(true) : reject(e)));
    probe.listen({ host, port, exclusive: true }, () => probe.close(() => resolve(false)));
  });
}

/** Whether an error is the listen's EADDRINUSE (a port taken between the check and the listen). */
export const isAddressInUse = (e: unknown): boolean => (e as NodeJS.ErrnoException | null)?.code === 'EADDRINUSE';

/** The one line: the port, and the setting that chooses another. */
export const portInUseLine = (host: string, port: number, setting: string): string =>
  `Port ${port} on ${host} is in use by another process: stop it, or set ${setting} to a free port (${setting}=0 picks one).`;

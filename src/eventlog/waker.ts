// A loop's sleep that a wake-up cuts short (the delivery engine's and the Kafka relay's): a wake
// that comes while the loop works is kept, so the next sleep returns at once and nothing is missed.
export class Waker {
  private resolver?: () => void;
  private woken = false;

  /** Ends the current sleep, or the next one at once. */
  wake(): void {
    this.woken = true;
    const r = this.resolver;
    this.resolver = undefined;
    r?.();
  }

  /** Forgets a wake-up that came before the work the loop is about to do. */
  clear(): void {
    this.woken = false;
  }

  sleep(ms: number): Promise<void> {
    if (this.woken) {
      this.woken = false;
      return Promise.resolve();
    }
    return new Promise((resolve) => {
      const t = setTimeout(() => {
        this.resolver = undefined;
        resolve();
      }, ms);
      this.resolver = () => {
        clearTimeout(t);
        this.woken = false;
        resolve();
      };
    });
  }
}

/** The loop's sleep, cut short by an event (a webhook, a ref change, `stop()`). */
export class Sleeper {
  private wakeUp: (() => void) | undefined;

  sleep(ms: number): Promise<void> {
    return new Promise((res) => {
      const t = setTimeout(done, ms);
      function done() {
        clearTimeout(t);
        res();
      }
      this.wakeUp = done;
    });
  }

  wake(): void {
    this.wakeUp?.();
  }
}

// The server's clock as this page sees it. A delay (Issue.notBefore) is an
// instant on the server's clock; this page's clock may be minutes off. Every
// answer of the API carries an HTTP Date header (whole seconds, the API's
// clock, which runs beside the database's): it bounds how far the server's
// clock is from this page's, and the bounds of every answer together narrow
// it to a fraction of a second. So "waiting until 14:03:22" ends when the
// server's clock says so, whatever this page's says.

/** Slack for a Date header a busy server wrote a moment late. */
const SLACK_MS = 250;

export class ServerClock {
  /** The offset (server − page, ms) lies in [low, high]; unknown until the first answer. */
  private low = Number.NEGATIVE_INFINITY;
  private high = Number.POSITIVE_INFINITY;

  /**
   * An answer asked at `sentAt` and received at `receivedAt` (this page's
   * clock) said `Date: date`: the server's clock read between date and
   * date + 1 s at some moment between the two. Bounds that contradict what is
   * known (one of the clocks was set since) replace it.
   */
  sample(date: string | null, sentAt: number, receivedAt: number): void {
    const said = date === null ? Number.NaN : Date.parse(date);
    if (!Number.isFinite(said)) return;
    const low = said - receivedAt - SLACK_MS;
    const high = said + 1000 - sentAt + SLACK_MS;
    if (low > this.high || high < this.low) {
      this.low = low;
      this.high = high;
      return;
    }
    this.low = Math.max(this.low, low);
    this.high = Math.min(this.high, high);
  }

  /** How far ahead of this page's clock the server's is (ms); 0 before any answer. */
  offset(): number {
    return Number.isFinite(this.low) && Number.isFinite(this.high) ? (this.low + this.high) / 2 : 0;
  }

  /** The server's time now (ms since the epoch), from this page's clock reading `pageNow`. */
  now(pageNow = Date.now()): number {
    return pageNow + this.offset();
  }
}

/**
 * An instant, in this page's time zone, as HH:MM:SS (24 hours), with the date
 * before it when it is not on the same day as `today`.
 */
export function clockTime(iso: string, today: number): string {
  const at = new Date(iso);
  const time = at.toLocaleTimeString("en-GB", { hour: "2-digit", minute: "2-digit", second: "2-digit", hour12: false });
  if (at.toDateString() === new Date(today).toDateString()) return time;
  return `${at.toLocaleDateString(undefined, { day: "numeric", month: "short", year: "numeric" })} ${time}`;
}

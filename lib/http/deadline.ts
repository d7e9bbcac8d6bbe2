/**
 * `work`'s outcome, or `late()` once `ms` passed first. The work itself runs on: in the service's
 * own process nothing can stop it (an isolate's pool ends the isolate instead).
 */
export function withDeadline<T>(work: Promise<T>, ms: number, late: () => Error): Promise<T> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(late()), ms);
    work.then(
      (value) => {
        clearTimeout(timer);
        resolve(value);
      },
      (error: unknown) => {
        clearTimeout(timer);
        reject(error);
      },
    );
  });
}

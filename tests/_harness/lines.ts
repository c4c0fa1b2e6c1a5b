/** Reading a child process's output as it arrives, line by line. @module */

/**
 * Reads `stream` to its end, calling `onLine` for each line as it completes (the last one even
 * without a newline), and resolves to the whole text.
 */
export async function collectLines(
  stream: ReadableStream<Uint8Array>,
  onLine: (line: string) => void,
): Promise<string> {
  let all = "", partial = "";
  const decoder = new TextDecoder();
  const take = (chunk: string) => {
    all += chunk;
    partial += chunk;
    const lines = partial.split("\n");
    partial = lines.pop()!;
    lines.forEach(onLine);
  };
  for await (const bytes of stream) take(decoder.decode(bytes, { stream: true }));
  take(decoder.decode());
  if (partial) onLine(partial);
  return all;
}

/** `parts` as one string: each part as `<length>:<part>` (length in UTF-16 code units). */
export function encodeParts(parts: readonly string[]): string
/** Appends `part` to an encoded string. */
export function appendPart(out: string, part: string): string
/** The parts of an encoded string (throws a TypeError on anything else). */
export function decodeParts(text: string): string[]

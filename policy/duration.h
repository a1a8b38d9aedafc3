/* duration.h - parsing of human durations ("250ms", "1.5s", "2m", "800us", "0", "off").
 * Pure code: no allocation, no I/O; shared by the library, the launcher and the tests. */
#ifndef TB_DURATION_H
#define TB_DURATION_H

#include <stddef.h>
#include <stdint.h>

/* Room for any text tb_duration_format writes ("9223372036854775807ns" and its NUL). */
#define TB_DURATION_TEXT_MAX 32

/*
 * Parses `text` into nanoseconds. Accepted: a non-negative decimal number with an optional
 * fraction followed by one unit of ns, us, ms, s, m, h (case-sensitive); or "off", or a
 * bare number whose value is zero ("0"). "off" and any zero give 0: no limit.
 * A fraction is exact or refused: "0.25ms" is 250us, "1.5ns" is an error, never rounded.
 * Blanks anywhere (leading and trailing too) are refused like any other junk. The largest
 * value is INT64_MAX ns (about 292 years). A text longer than TB_DURATION_TEXT_LONGEST
 * characters is refused whatever it spells (leading zeros included), from every source.
 * Returns 0 and stores *out_ns on success. On error returns -1, leaves *out_ns untouched and
 * points *why at a static, human sentence ("a duration needs a unit, e.g. 250ms"), a
 * different one for each kind of mistake.
 */
int tb_duration_parse(const char *text, int64_t *out_ns, const char **why);

#define TB_DURATION_TEXT_LONGEST 64

/*
 * Writes `ns` the way an operator would ("250ms", "1.5s", "2m", "off") into buf, truncated
 * to `len` bytes (TB_DURATION_TEXT_MAX always suffices); returns buf. The one printer of
 * durations: logs, `timebox check` and its lint all use it. tb_duration_parse reads the
 * text back to the same value. A negative `ns` (a setting's "not set") is written "unset".
 * @unittest test_duration.c test_format, test_round_trip
 */
char *tb_duration_format(int64_t ns, char *buf, size_t len);

#endif

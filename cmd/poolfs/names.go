package main

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// escapeName writes a file name as GNU ls -b (--quoting-style=escape)
// does in a UTF-8 locale: the C escapes \a \b \t \n \v \f \r for those
// controls, \ooo (octal, per byte) for other non-printable characters and
// for bytes that are not UTF-8, a backslash as \\ and a space as "\ ".
// Printable characters, non-ASCII ones included, stay as they are.
func escapeName(name string) string {
	var b strings.Builder
	for i := 0; i < len(name); {
		r, n := utf8.DecodeRuneInString(name[i:])
		switch {
		case r == utf8.RuneError && n <= 1:
			fmt.Fprintf(&b, `\%03o`, name[i])
		case r == '\\':
			b.WriteString(`\\`)
		case r == ' ':
			b.WriteString(`\ `)
		case r < 0x80 && strings.ContainsRune("\a\b\t\n\v\f\r", r):
			b.WriteByte('\\')
			b.WriteByte("abtnvfr"[strings.IndexRune("\a\b\t\n\v\f\r", r)])
		case !unicode.IsPrint(r):
			for _, c := range []byte(name[i : i+n]) {
				fmt.Fprintf(&b, `\%03o`, c)
			}
		default:
			b.WriteString(name[i : i+n])
		}
		i += n
	}
	return b.String()
}

// Package shell quotes words for a POSIX shell: the one place mrep writes a command a user may
// paste (plan train's reproduce command, the scripts --emit writes).
package shell

import "strings"

// Quote is s as one shell word: as it is when every character is plain, else in single
// quotes, each quote inside closed, escaped and reopened. The empty string becomes a pair of
// quotes, so an empty argument survives.
func Quote(s string) string {
	if s == "" {
		return "''"
	}
	for _, r := range s {
		if !plain(r) {
			return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
		}
	}
	return s
}

// Join is args as one command line, each quoted.
func Join(args ...string) string {
	q := make([]string, len(args))
	for i, a := range args {
		q[i] = Quote(a)
	}
	return strings.Join(q, " ")
}

// plain characters mean nothing to a shell anywhere in a word ('=' only names a variable
// before the command word, and no quoted word is in that place).
func plain(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./:@+=,", r)
}

// Package strs holds string-list helpers every layer uses.
package strs

// Dedupe keeps the first of each string, in order (in place).
func Dedupe(in []string) []string {
	seen := map[string]bool{}
	out := in[:0]
	for _, s := range in {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

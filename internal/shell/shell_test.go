package shell

import (
	"os/exec"
	"strings"
	"testing"
)

// Every word comes back from a real shell as it went in: empty, spaces, quotes, globs,
// variables, newlines and non-ASCII.
func TestQuoteRoundTripsThroughSh(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh on this machine")
	}
	words := []string{"", "plain-word_1.2:3@x+y=z,w", "two words", "it's", `"dq"`, "*", "model.layers.[0-9].*", "$HOME", "`id`",
		"a\nb", "~", "#c", "é ü", "'", "''", `\`, "-"}
	// printf prints each argument between markers, so an empty or lost argument shows
	out, err := exec.Command(sh, "-c", "printf '<%s>' "+Join(words...)).Output()
	if err != nil {
		t.Fatal(err)
	}
	var want strings.Builder
	for _, w := range words {
		want.WriteString("<" + w + ">")
	}
	if string(out) != want.String() {
		t.Errorf("the shell read\n%q\nwant\n%q", out, want.String())
	}
}

func TestQuoteLeavesPlainWords(t *testing.T) {
	for in, want := range map[string]string{"Llama-3.1-8B": "Llama-3.1-8B", "--gpus": "--gpus", "": "''", "a b": "'a b'", "it's": `'it'\''s'`} {
		if got := Quote(in); got != want {
			t.Errorf("Quote(%q) = %s, want %s", in, got, want)
		}
	}
}

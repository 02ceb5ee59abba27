package examples

import (
	"strings"
	"testing"
)

// Every zoo model loaded from a Hugging Face config names its repository (what --emit's
// commands load); only the variants mrep built itself have none.
func TestZooHuggingFaceIDs(t *testing.T) {
	built := map[string]bool{"Llama-3.1-8B-mha": true, "DeepSeek-V3-allmoe": true, "tiny-deepseek-trace": true, "tiny-llama-trace": true, "tiny-mixtral-trace": true}
	for _, n := range Names() {
		id := HFID(n)
		switch {
		case built[n] && id != "":
			t.Errorf("%s is mrep's own variant, yet has the id %q", n, id)
		case !built[n] && (id == "" || strings.Count(id, "/") != 1):
			t.Errorf("%s: Hugging Face id %q, want owner/name", n, id)
		}
	}
	if HFID("not-a-zoo-model") != "" {
		t.Error("a name outside the zoo has no id")
	}
}

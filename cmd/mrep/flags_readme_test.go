package main

import (
	"fmt"
	"os"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
)

// flagUse is one flag as one command declares it.
type flagUse struct {
	cmd  string
	flag cli.Flag
}

// allFlags is every flag of the command line by its name: the global ones under "mrep", each
// command's under its path ("plan serve").
func allFlags(app *cli.App) map[string][]flagUse {
	by := map[string][]flagUse{}
	for _, f := range app.Flags {
		by[f.Names()[0]] = append(by[f.Names()[0]], flagUse{"mrep", f})
	}
	var walk func(prefix string, cs []*cli.Command)
	walk = func(prefix string, cs []*cli.Command) {
		for _, c := range cs {
			if c.Hidden {
				continue
			}
			name := strings.TrimSpace(prefix + " " + c.Name)
			for _, f := range c.Flags {
				by[f.Names()[0]] = append(by[f.Names()[0]], flagUse{name, f})
			}
			walk(name, c.Subcommands)
		}
	}
	walk("", app.Commands)
	return by
}

// valueKind is what a flag's value is, a list of it or one: a name means one thing whether a
// command takes one value of it or several.
func valueKind(f cli.Flag) string {
	t := reflect.TypeOf(f).Elem().Name()
	t = strings.TrimSuffix(strings.TrimSuffix(t, "Flag"), "Slice")
	switch t {
	case "Int", "Int64", "Uint", "Uint64":
		return "integer"
	}
	return strings.ToLower(t)
}

// One meaning per flag name: a command's flag never takes a global flag's name (the command's
// would hide it), and a name has one alias set and one kind of value wherever it appears.
func TestFlagNamesMeanOneThing(t *testing.T) {
	by := allFlags(NewApp(Env{}))
	if len(by) < 100 {
		t.Fatalf("%d flag names: the walk missed commands", len(by))
	}
	for name, uses := range by {
		global := uses[0].cmd == "mrep"
		for _, u := range uses[1:] {
			if global {
				t.Errorf("--%s is a global flag and %s declares its own", name, u.cmd)
			}
			if a, b := strings.Join(u.flag.Names(), ","), strings.Join(uses[0].flag.Names(), ","); a != b {
				t.Errorf("--%s: %s spells it %s, %s %s", name, u.cmd, a, uses[0].cmd, b)
			}
			if a, b := valueKind(u.flag), valueKind(uses[0].flag); a != b {
				t.Errorf("--%s: a %s on %s, a %s on %s", name, a, u.cmd, b, uses[0].cmd)
			}
		}
	}
}

// flagReference is the README's reference of every flag, generated from the command line:
// flags grouped by the commands that share them, each with its aliases, default and usage (one
// row per wording where commands word or default it differently, naming those commands).
func flagReference(app *cli.App) string {
	by := allFlags(app)
	groups := map[string][]string{}
	for name, uses := range by {
		var cmds []string
		for _, u := range uses {
			cmds = append(cmds, u.cmd)
		}
		k := strings.Join(cmds, ", ")
		groups[k] = append(groups[k], name)
	}
	keys := make([]string, 0, len(groups))
	for k := range groups {
		keys = append(keys, k)
	}
	// the global flags first, then the groups shared by most commands, then one command's own
	sort.Slice(keys, func(i, j int) bool {
		gi, gj := keys[i] == "mrep", keys[j] == "mrep"
		if gi != gj {
			return gi
		}
		ni, nj := strings.Count(keys[i], ",")+1, strings.Count(keys[j], ",")+1
		if ni != nj {
			return ni > nj
		}
		return keys[i] < keys[j]
	})
	cell := func(s string) string {
		s = strings.ReplaceAll(s, "|", `\|`)
		return strings.ReplaceAll(s, "\n", " ")
	}
	var b strings.Builder
	for _, k := range keys {
		names := groups[k]
		sort.Strings(names)
		title := "`mrep " + strings.ReplaceAll(k, ", ", "`, `mrep ") + "`"
		if k == "mrep" {
			title = "Every command (`mrep --FLAG COMMAND`, or after the command)"
		}
		fmt.Fprintf(&b, "\n%s:\n\n| Flag | Default | What it sets |\n|---|---|---|\n", title)
		for _, name := range names {
			type variant struct {
				def, usage string
				cmds       []string
			}
			var vs []*variant
			for _, u := range by[name] {
				def, usage := flagDoc(u.flag)
				var v *variant
				for _, x := range vs {
					if x.def == def && x.usage == usage {
						v = x
					}
				}
				if v == nil {
					v = &variant{def: def, usage: usage}
					vs = append(vs, v)
				}
				v.cmds = append(v.cmds, u.cmd)
			}
			spelled := []string{}
			for _, n := range by[name][0].flag.Names() {
				if len(n) == 1 {
					spelled = append(spelled, "`-"+n+"`")
				} else {
					spelled = append(spelled, "`--"+n+"`")
				}
			}
			for _, v := range vs {
				flag := strings.Join(spelled, ", ")
				if len(vs) > 1 {
					flag += " (" + strings.Join(v.cmds, ", ") + ")"
				}
				fmt.Fprintf(&b, "| %s | %s | %s |\n", flag, cell(v.def), cell(v.usage))
			}
		}
	}
	return b.String()
}

// flagDoc is a flag's default (as markdown: – for none) and usage, with its environment variables.
func flagDoc(f cli.Flag) (def, usage string) {
	if d, ok := f.(cli.DocGenerationFlag); ok {
		usage = d.GetUsage()
		if d.TakesValue() {
			def = d.GetDefaultText()
			if def == "" {
				def = d.GetValue()
			}
		}
		if env := d.GetEnvVars(); len(env) > 0 {
			usage += " (env " + strings.Join(env, ", ") + ")"
		}
	}
	if def == "" || def == `""` || def == "[]" || def == "0" {
		return "–", usage
	}
	return "`" + def + "`", usage
}

// Every flag is in the README: its reference section is the command line's own, regenerated
// with -update.
func TestREADMEFlagReference(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	s := string(readme)
	const open, close = "<!-- flag-reference -->\n", "<!-- /flag-reference -->"
	i, j := strings.Index(s, open), strings.Index(s, close)
	if i < 0 || j < i {
		t.Fatal("README has no flag-reference section")
	}
	want := flagReference(NewApp(Env{})) + "\n"
	if got := s[i+len(open) : j]; got != want {
		if *update {
			s = s[:i+len(open)] + want + s[j:]
			if err := os.WriteFile("../../README.md", []byte(s), 0o644); err != nil {
				t.Fatal(err)
			}
			return
		}
		t.Errorf("README's flag reference is stale (go test ./cmd/mrep -run READMEFlagReference -update)")
	}
	for name := range allFlags(NewApp(Env{})) {
		if !strings.Contains(s, "`--"+name+"`") {
			t.Errorf("--%s is not in the README", name)
		}
	}
}

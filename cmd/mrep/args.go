package main

import (
	"strings"

	"github.com/urfave/cli/v2"
)

// interspersed moves a subcommand's positional arguments after its flags, so that
// `mrep analyze RUN --chip H200` works as users type it: urfave/cli v2 stops parsing flags at
// the first positional argument. Which flags take a value comes from the command's own
// definitions; "--" ends flag parsing as usual.
func interspersed(app *cli.App, args []string) []string {
	if len(args) < 2 {
		return args
	}
	// global flags come before the subcommand
	i := 1
	for i < len(args) && strings.HasPrefix(args[i], "-") {
		if !strings.Contains(args[i], "=") && takesValue(app.Flags, args[i]) {
			i++
		}
		i++
	}
	if i >= len(args) {
		return args
	}
	cmd := app.Command(args[i])
	if cmd == nil {
		return args
	}
	// `mrep plan train ...`: descend to the subcommand whose flags apply
	for i+1 < len(args) && len(cmd.Subcommands) > 0 {
		sub := cmd.Command(args[i+1])
		if sub == nil {
			break
		}
		cmd, i = sub, i+1
	}
	// global flags given after the verb (`mrep runs --db x.db`) move before it, where the
	// parser looks for them; the verb's own flag of the same name wins
	out := append([]string{}, args[:i+1]...)
	var global, positional []string
	rest := args[i+1:]
	for j := 0; j < len(rest); j++ {
		a := rest[j]
		switch {
		case a == "--":
			positional = append(positional, rest[j:]...)
			j = len(rest)
		case strings.HasPrefix(a, "-") && len(a) > 1 && hasFlag(app.Flags, a) && !hasFlag(cmd.Flags, a):
			global = append(global, a)
			if !strings.Contains(a, "=") && takesValue(app.Flags, a) && j+1 < len(rest) {
				global = append(global, rest[j+1])
				j++
			}
		case strings.HasPrefix(a, "-") && len(a) > 1:
			out = append(out, a)
			if !strings.Contains(a, "=") && takesValue(cmd.Flags, a) && j+1 < len(rest) {
				out = append(out, rest[j+1])
				j++
			}
		default:
			positional = append(positional, a)
		}
	}
	out = append(out, positional...)
	if len(global) > 0 {
		// before the first verb: args[:first] are the program and global flags given there
		first := 1
		for first < len(out) && app.Command(out[first]) == nil {
			if !strings.Contains(out[first], "=") && takesValue(app.Flags, out[first]) {
				first++
			}
			first++
		}
		out = append(append(append([]string{}, out[:first]...), global...), out[first:]...)
	}
	return out
}

// hasFlag says whether arg (-x, --name or --name=value) names one of flags.
func hasFlag(flags []cli.Flag, arg string) bool {
	name, _, _ := strings.Cut(strings.TrimLeft(arg, "-"), "=")
	for _, f := range flags {
		for _, n := range f.Names() {
			if n == name {
				return true
			}
		}
	}
	return false
}

func takesValue(flags []cli.Flag, arg string) bool {
	name := strings.TrimLeft(arg, "-")
	for _, f := range flags {
		for _, n := range f.Names() {
			if n == name {
				_, isBool := f.(*cli.BoolFlag)
				return !isBool
			}
		}
	}
	return false
}

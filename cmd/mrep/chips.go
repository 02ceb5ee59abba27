package main

import (
	"github.com/urfave/cli/v2"

	"github.com/mrep-dev/mrep/render"
)

func chipsCommand() *cli.Command {
	return &cli.Command{
		Name:  "chips",
		Usage: "list the chip database (embedded, plus --chips-file)",
		Flags: []cli.Flag{&cli.BoolFlag{Name: "json", Usage: "every figure with its sources"}},
		Action: func(c *cli.Context) error {
			db, err := chipDB(c)
			if err != nil {
				return err
			}
			if c.Bool("json") {
				return writeJSON(c.App.Writer, db.All())
			}
			return render.WriteChips(c.App.Writer, db.All())
		},
	}
}

package chart

import (
	"encoding/xml"
	"io"
	"strings"

	gochart "github.com/wcharczuk/go-chart/v2"
)

// Renderer is any go-chart gochart.
type Renderer interface {
	Render(rp gochart.RendererProvider, w io.Writer) error
}

// RenderPNG and RenderSVG write a gochart.
func RenderPNG(c Renderer, w io.Writer) error { return c.Render(gochart.PNG, w) }

// RenderSVG writes a chart as SVG. go-chart writes text into <text> elements verbatim, so a
// model named "<script>…" would plant markup: every string is XML-escaped on its way in.
func RenderSVG(c Renderer, w io.Writer) error { return c.Render(safeSVG, w) }

func safeSVG(width, height int) (gochart.Renderer, error) {
	r, err := gochart.SVG(width, height)
	if err != nil {
		return nil, err
	}
	return escapingRenderer{r}, nil
}

// escapingRenderer escapes text for XML; measuring still sees the text as drawn.
type escapingRenderer struct{ gochart.Renderer }

func (e escapingRenderer) Text(body string, x, y int) { e.Renderer.Text(XMLText(body), x, y) }

// XMLText escapes s for XML character data: markup characters as entities, and characters
// XML 1.0 cannot carry at all (control characters, invalid UTF-8) as U+FFFD.
func XMLText(s string) string {
	var b strings.Builder
	if err := xml.EscapeText(&b, []byte(s)); err != nil {
		return "\uFFFD"
	}
	return b.String()
}

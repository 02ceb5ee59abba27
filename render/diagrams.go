package render

import (
	"fmt"
	"strings"

	"github.com/mrep-dev/mrep/analyzer"
)

// Diagrams returns Mermaid flowcharts generated from this model: the decoder stack, one block,
// and (for MoE models) the routed dataflow.
func Diagrams(m *analyzer.Model) []string {
	fp := m.Fingerprint
	if !fp.Transformer {
		return []string{fmt.Sprintf("```mermaid\nflowchart TB\n    x[\"input\"] --> net[\"%s<br/>%d parameter tensors, no attention found\"]\n    net --> y[\"output\"]\n```", mermaidText(m.Name), len(m.Ops))}
	}
	var out []string
	var b strings.Builder
	b.WriteString("```mermaid\nflowchart TB\n")
	fmt.Fprintf(&b, "    ids[\"Input token ids<br/>[B,S]\"] --> emb[\"Token embedding<br/>V=%d, H=%d\"]\n", fp.Vocab, fp.Hidden)
	attn := attnLabel(fp)
	dense := fp.Layers
	prev := "emb"
	if fp.MoE != nil {
		dense = fp.Layers - fp.MoE.MoELayers
	}
	if dense > 0 {
		fmt.Fprintf(&b, "    %s --> dense[\"Dense decoder blocks x %d<br/>Block = %s -> %s -> + -> %s -> %s FFN -> +\"]\n",
			prev, dense, fp.Normalization, attn, fp.Normalization, ffnKind(fp))
		prev = "dense"
	}
	if fp.MoE != nil {
		fmt.Fprintf(&b, "    %s --> moe[\"MoE decoder blocks x %d<br/>Block = %s -> %s -> + -> %s -> Routed MoE -> +\"]\n",
			prev, fp.MoE.MoELayers, fp.Normalization, attn, fp.Normalization)
		prev = "moe"
	}
	fmt.Fprintf(&b, "    %s --> norm[\"Final %s\"]\n", prev, fp.Normalization)
	tied := ""
	if fp.TiedEmbeddings {
		tied = " (tied to the embedding)"
	}
	fmt.Fprintf(&b, "    norm --> head[\"LM head%s<br/>[B,S,V]\"]\n```", tied)
	out = append(out, b.String())

	b.Reset()
	b.WriteString("```mermaid\nflowchart TB\n")
	b.WriteString("    x0[\"x_l<br/>[B,S,H]\"] --> n1[\"" + fp.Normalization + "\"]\n")
	fmt.Fprintf(&b, "    n1 --> attn[\"%s\"]\n", attnDetail(fp))
	b.WriteString("    x0 --> add1[\"Residual add\"]\n    attn --> add1\n")
	b.WriteString("    add1 --> n2[\"" + fp.Normalization + "\"]\n")
	fmt.Fprintf(&b, "    n2 --> ffn[\"%s\"]\n", ffnDetail(fp))
	b.WriteString("    add1 --> add2[\"Residual add\"]\n    ffn --> add2\n    add2 --> x1[\"x_{l+1}<br/>[B,S,H]\"]\n")
	fmt.Fprintf(&b, "    kv[\"KV cache (decode)<br/>[B,L,%d] per layer\"] --> attn\n    attn --> kvw[\"Append KV_t\"]\n```", fp.CKV)
	out = append(out, b.String())

	if fp.MoE != nil {
		b.Reset()
		b.WriteString("```mermaid\nflowchart TB\n")
		fmt.Fprintf(&b, "    h[\"Token hidden<br/>[B*S,%d]\"] --> r[\"Router logits<br/>[B*S,%d]\"]\n", fp.Hidden, fp.MoE.RoutedExperts)
		fmt.Fprintf(&b, "    r --> tk[\"Top-k select (k=%d)\"]\n", fp.MoE.TopK)
		fmt.Fprintf(&b, "    tk --> ex[\"Selected experts (k MLPs)<br/>%d -> %d -> %d\"]\n", fp.Hidden, fp.MoE.ExpertFFN, fp.Hidden)
		b.WriteString("    ex --> mix[\"Weighted combine\"]\n    mix --> out[\"FFN out<br/>[B*S,H]\"]\n")
		if fp.MoE.SharedExperts > 0 {
			fmt.Fprintf(&b, "    h --> sh[\"Shared expert(s) (n=%d)\"]\n    sh --> out\n", fp.MoE.SharedExperts)
		}
		b.WriteString("```")
		out = append(out, b.String())
	}
	return out
}

func attnLabel(fp analyzer.Fingerprint) string {
	if fp.SlidingWindow > 0 {
		return fp.Attention + " (window " + fmt.Sprint(fp.SlidingWindow) + ")"
	}
	return fp.Attention
}

func ffnKind(fp analyzer.Fingerprint) string {
	if fp.GatedMLP {
		return "Gated"
	}
	return "Dense"
}

func attnDetail(fp analyzer.Fingerprint) string {
	if m := fp.MLA; m != nil {
		return fmt.Sprintf("MLA attention (per layer)<br/>Q: H->%d->h*(%d+%d)<br/>KV latent: [B,L,(%d+%d)]<br/>Out: h*%d->H",
			m.QLoraRank, m.QKNope, m.QKRope, m.KVLoraRank, m.QKRope, m.VHead)
	}
	return fmt.Sprintf("%s attention (per layer)<br/>h=%d query heads, %d KV heads, d=%d<br/>Out: h*d->H", attnLabel(fp), fp.Heads, fp.KVHeads, fp.HeadDim)
}

func ffnDetail(fp analyzer.Fingerprint) string {
	s := fmt.Sprintf("FFN (per layer)<br/>Dense: H->%d->H", fp.Intermediate)
	if fp.MoE != nil {
		s += fmt.Sprintf("<br/>MoE: E=%d, top-k=%d, shared=%d, d_moe=%d", fp.MoE.RoutedExperts, fp.MoE.TopK, fp.MoE.SharedExperts, fp.MoE.ExpertFFN)
	}
	return s
}

// mermaidText makes a name safe inside a quoted mermaid label: no line breaks or control
// characters, and the characters mermaid or HTML would read as syntax as entities.
func mermaidText(s string) string {
	s = Visible(s)
	return strings.NewReplacer(`"`, "#quot;", "<", "#lt;", ">", "#gt;", "&", "#amp;", "`", "#96;").Replace(s)
}

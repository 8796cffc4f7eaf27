package ui

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"path"
	"strings"
	"time"
)

// pages holds the parsed templates: every page is the layout around its own "content";
// parts (the fragments that pages poll) are shared.
type pages struct {
	base  *template.Template
	pages map[string]*template.Template
}

func parsePages() (*pages, error) {
	// part_*.html are more parts, each file a page's panels of one feature.
	base, err := template.New("").Funcs(funcs).ParseFS(assets, "templates/layout.html", "templates/parts.html", "templates/part_*.html")
	if err != nil {
		return nil, fmt.Errorf("parse console templates: %w", err)
	}
	files, err := fs.Glob(assets, "templates/page_*.html")
	if err != nil {
		return nil, err
	}
	p := &pages{base: base, pages: map[string]*template.Template{}}
	for _, f := range files {
		t, err := template.Must(base.Clone()).ParseFS(assets, f)
		if err != nil {
			return nil, fmt.Errorf("parse console template %s: %w", f, err)
		}
		name := strings.TrimSuffix(strings.TrimPrefix(path.Base(f), "page_"), ".html")
		p.pages[name] = t
	}
	return p, nil
}

// page is what the layout needs around a page's content.
type page struct {
	Title   string
	Session session
	// Nav marks the current section in the header.
	Nav  string
	Body any
	// Outages are the banners of unreachable execution targets (renderPage reads them).
	Outages []outage
}

// renderPage writes the page name within the layout.
func (c *Console) renderPage(w http.ResponseWriter, r *http.Request, status int, name string, p page) {
	t, ok := c.pages.pages[name]
	if !ok {
		http.Error(w, "no such page", http.StatusInternalServerError)
		return
	}
	p.Outages = c.outages(r.Context(), p.Session)
	var buf bytes.Buffer
	if err := t.ExecuteTemplate(&buf, "layout", p); err != nil {
		c.cfg.Logger.ErrorContext(r.Context(), "ui_render_failed", "page", name, "error", err)
		http.Error(w, "the page could not be rendered", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Vary", "HX-Request")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// render writes the fragment name. A 200 carries an ETag of its bytes: a poll that
// sends it back (If-None-Match) and would get the same bytes gets 304 without a body,
// and htmx leaves the page alone.
func (c *Console) render(w http.ResponseWriter, r *http.Request, status int, name string, data any) {
	var buf bytes.Buffer
	if err := c.pages.base.ExecuteTemplate(&buf, name, data); err != nil {
		c.cfg.Logger.ErrorContext(r.Context(), "ui_render_failed", "part", name, "error", err)
		http.Error(w, "the page could not be rendered", http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-cache, private")
	h.Set("Vary", "HX-Request")
	if status == http.StatusOK {
		sum := sha256.Sum256(buf.Bytes())
		etag := `"` + hex.EncodeToString(sum[:12]) + `"`
		h.Set("ETag", etag)
		if r.Header.Get("If-None-Match") == etag {
			w.WriteHeader(http.StatusNotModified)
			return
		}
	}
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// funcs are the templates' helpers; times are shown relative to now with the absolute
// UTC time in a <time> element.
var funcs = template.FuncMap{
	"lower": strings.ToLower,
	"join":  strings.Join,
	"add":   func(a, b int) int { return a + b },
	"utc": func(t time.Time) string {
		if t.IsZero() {
			return ""
		}
		return t.UTC().Format("2006-01-02 15:04:05 UTC")
	},
	"iso": func(t time.Time) string { return t.UTC().Format(time.RFC3339) },
	"statusLabel": func(s string) string {
		return strings.ReplaceAll(s, "_", " ")
	},
}

// ago says how long ago t was, in the largest unit that fits.
func ago(now, t time.Time) string {
	d := now.Sub(t)
	switch {
	case d < 0:
		return "in " + span(-d)
	case d < 5*time.Second:
		return "just now"
	default:
		return span(d) + " ago"
	}
}

// span writes d in its largest whole unit or two.
func span(d time.Duration) string {
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		m, s := int(d.Minutes()), int(d.Seconds())%60
		if s == 0 || m >= 10 {
			return fmt.Sprintf("%dm", m)
		}
		return fmt.Sprintf("%dm %ds", m, s)
	case d < 48*time.Hour:
		h, m := int(d.Hours()), int(d.Minutes())%60
		if m == 0 || h >= 10 {
			return fmt.Sprintf("%dh", h)
		}
		return fmt.Sprintf("%dh %dm", h, m)
	default:
		return fmt.Sprintf("%dd", int(d.Hours()/24))
	}
}

// when is a moment as pages show it: relative, with the absolute time for the tooltip
// and for machines.
type when struct {
	At       time.Time
	Relative string
}

func (c *Console) when(t *time.Time) *when {
	if t == nil || t.IsZero() {
		return nil
	}
	return &when{At: *t, Relative: ago(c.cfg.Now(), *t)}
}

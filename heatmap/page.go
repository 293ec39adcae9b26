package heatmap

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io"
	"strings"
)

// The vendored ECharts build (npm package echarts, Apache-2.0; see
// assets/LICENSE, assets/NOTICE, assets/VERSION and assets/refresh.sh).
//
//go:embed assets/echarts.min.js
var echartsJS string

//go:embed page.css
var pageCSS string

// captureJS records script errors and blocked loads before anything else
// runs, so the browser tests can assert there were none.
const captureJS = `window.__cacheheatErrors = [];
window.addEventListener('error', function (e) { window.__cacheheatErrors.push(String(e.message || e.type)); });
document.addEventListener('securitypolicyviolation', function (e) { window.__cacheheatErrors.push('blocked by the page policy: ' + e.violatedDirective + ' ' + e.blockedURI); });
(function (orig) { console.error = function () { window.__cacheheatErrors.push(Array.prototype.join.call(arguments, ' ')); return orig.apply(console, arguments); }; })(console.error);`

// CSP allows inline scripts and styles and data: images, and nothing
// else: a report never loads anything from anywhere.
const CSP = "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:"

// DataElementID is the id of the page's JSON data block.
const DataElementID = "cacheheat-data"

// Page is one self-contained HTML page: the shell (CSP, styles, inline
// ECharts, data block) around a body. The report and the diff report both
// use it.
type Page struct {
	Title string
	// Body is the page's content, rendered by html/template (so already
	// escaped).
	Body template.HTML
	// Data is encoded with ScriptJSON into the <script
	// type="application/json" id="cacheheat-data"> block the page's
	// script reads with JSON.parse.
	Data any
	// Script is the page's own static JavaScript, run after ECharts and
	// the data block are in place. Never put recording data in it.
	Script template.JS
	// Style is extra static CSS after the shared styles.
	Style template.CSS
	// Stream lets the page open connections to the server that sent it
	// (connect-src 'self'): the live view's event stream.
	Stream bool
	// Banner, when set, is shown in red above everything (simulated.go).
	Banner string
}

var shellTmpl = template.Must(template.New("shell").Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="{{.CSP}}">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<title>{{.Title}}</title>
<style>{{.CSS}}{{.Style}}{{if .Banner}}{{.BannerCSS}}{{end}}</style>
<script>{{.Capture}}</script>
</head>
<body>
{{if .Banner}}<p class="sim-banner" role="alert">{{.Banner}}</p>
{{end}}{{.Body}}
<script type="application/json" id="{{.DataID}}">{{.Data}}</script>
<script>{{.ECharts}}</script>
<script>{{.Script}}</script>
</body>
</html>
`))

// WritePage writes a whole page to w.
func WritePage(w io.Writer, p Page) error {
	data, err := ScriptJSON(p.Data)
	if err != nil {
		return err
	}
	// html/template passes invalid UTF-8 through; a page must be valid
	// UTF-8, and U+FFFD is inert in every HTML context.
	csp := CSP
	if p.Stream {
		csp += "; connect-src 'self'"
	}
	return shellTmpl.Execute(w, map[string]any{
		"CSP":       csp,
		"Capture":   template.JS(captureJS),
		"Title":     strings.ToValidUTF8(p.Title, "\uFFFD"),
		"CSS":       template.CSS(pageCSS),
		"Style":     p.Style,
		"Body":      template.HTML(strings.ToValidUTF8(string(p.Body), "\uFFFD")),
		"DataID":    DataElementID,
		"Data":      template.JS(data),
		"ECharts":   template.JS(echartsJS),
		"Script":    p.Script,
		"Banner":    strings.ToValidUTF8(p.Banner, "\uFFFD"),
		"BannerCSS": template.CSS(bannerCSS),
	})
}

// errUnsafeJSON means the encoder let through a byte sequence that could
// end a <script> element or a JavaScript string: a bug, never data.
var errUnsafeJSON = errors.New("encoded data contains a raw '<', '>', '&', U+2028 or U+2029")

// ScriptJSON encodes v as JSON that is safe inside a <script> element:
// '<', '>' and '&' become \u003c, \u003e and \u0026 (so no "</script>" or
// "<!--" can appear), U+2028 and U+2029 become \u2028 and \u2029, and
// invalid UTF-8 becomes U+FFFD. It checks the result rather than trusting
// the encoder's defaults.
func ScriptJSON(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(true)
	if err := enc.Encode(v); err != nil {
		return nil, fmt.Errorf("encoding page data: %w", err)
	}
	b := bytes.TrimRight(buf.Bytes(), "\n")
	if bytes.ContainsAny(b, "<>&") || bytes.Contains(b, []byte("\u2028")) || bytes.Contains(b, []byte("\u2029")) {
		return nil, errUnsafeJSON
	}
	return b, nil
}

package web

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestCheckHost(t *testing.T) {
	h := CheckHost("127.0.0.1:9632", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	for host, want := range map[string]int{
		"127.0.0.1:9632":          http.StatusOK,
		"localhost:9632":          http.StatusOK,
		"[::1]:9632":              http.StatusOK,
		"10.1.2.3:9632":           http.StatusOK, // an IP literal cannot be rebound
		"attacker.example:9632":   http.StatusMisdirectedRequest,
		"localhost.attacker.test": http.StatusMisdirectedRequest,
		"":                        http.StatusMisdirectedRequest,
	} {
		r := httptest.NewRequest("GET", "/metrics", nil)
		r.Host = host
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != want {
			t.Errorf("Host %q: %d, want %d", host, w.Code, want)
		}
	}
	if !AllowedHost("myhost.internal:9632", "myhost.internal:9632") {
		t.Error("the listen address's own name is refused")
	}
}

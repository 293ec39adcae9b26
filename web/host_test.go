package web

import (
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestCheckHost: DNS rebinding names are refused with 421; the names a
// local user types are served.
func TestCheckHost(t *testing.T) {
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusOK) })
	loop := &net.TCPAddr{IP: net.ParseIP("127.0.0.1"), Port: 8080}
	lan := &net.TCPAddr{IP: net.ParseIP("192.168.1.5"), Port: 8080}
	any := &net.TCPAddr{IP: net.IPv4zero, Port: 8080}
	cases := []struct {
		addr string
		ln   net.Addr
		host string
		want int
	}{
		{"127.0.0.1:8080", loop, "127.0.0.1:8080", 200},
		{"127.0.0.1:8080", loop, "localhost:8080", 200},
		{"127.0.0.1:8080", loop, "LOCALHOST.:8080", 200},
		{"127.0.0.1:8080", loop, "[::1]:8080", 200},
		{"127.0.0.1:8080", loop, "127.0.0.2", 200},
		{"127.0.0.1:8080", loop, "attacker.example:8080", 421},
		{"127.0.0.1:8080", loop, "attacker.example", 421},
		{"127.0.0.1:8080", loop, "localhost.attacker.example", 421},
		{"127.0.0.1:8080", loop, "192.168.1.5:8080", 421},
		{"127.0.0.1:8080", loop, "", 421},
		{"192.168.1.5:8080", lan, "192.168.1.5:8080", 200},
		{"myhost.lan:8080", lan, "myhost.lan:8080", 200},
		{"myhost.lan:8080", lan, "attacker.example:8080", 421},
		{"0.0.0.0:8080", any, "10.1.2.3:8080", 200},
		{"0.0.0.0:8080", any, "attacker.example:8080", 421},
	}
	for _, c := range cases {
		h := CheckHost(ok, c.addr, c.ln)
		r := httptest.NewRequest("GET", "/", nil)
		r.Host = c.host
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != c.want {
			t.Errorf("listen %s, Host %q: %d, want %d", c.addr, c.host, w.Code, c.want)
		}
	}
}

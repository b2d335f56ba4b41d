package membership

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/etcdhook/etcdhook/api"
)

// A login round-trips through a Secret's data; a rotation moves to the other slot with a new password
// and keeps the old login for the grace; an edited Secret is no login; the certificate's keys stay.
func TestLogin(t *testing.T) {
	now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	cert := map[string][]byte{"tls.crt": []byte("c"), "tls.key": []byte("k"), "ca.crt": []byte("a")}
	l := Login{User: api.LoginSlot("app", 1), Password: "first-password-0123456789"}
	data := l.put(cert)
	require.Equal(t, "c", string(data["tls.crt"]), "the certificate is kept")
	back, ok := loginOf("app", data)
	require.True(t, ok)
	require.Equal(t, l, back)
	require.Equal(t, map[string]string{"app~1": l.Password}, back.passwords(now))

	next, err := back.next("app", "m1", now, time.Minute)
	require.NoError(t, err)
	require.Equal(t, "app~2", next.User)
	require.NotEqual(t, l.Password, next.Password)
	require.True(t, usablePassword(next.Password))
	require.Equal(t, Login{User: "app~2", Password: next.Password, Previous: "app~1", PreviousPassword: l.Password, PreviousUntil: now.Add(time.Minute), Mark: "m1"}, next)
	back, ok = loginOf("app", next.put(data))
	require.True(t, ok)
	require.Equal(t, next, back, "the grace and the mark are in the Secret")
	require.Equal(t, map[string]string{"app~2": next.Password, "app~1": l.Password}, back.passwords(now.Add(59*time.Second)), "both work during the grace")
	require.Equal(t, map[string]string{"app~2": next.Password}, back.passwords(now.Add(time.Minute)), "the old one not after it")
	require.False(t, back.retired(now.Add(59*time.Second)))
	require.True(t, back.retired(now.Add(time.Minute)))
	again, err := back.next("app", "m2", now, time.Minute)
	require.NoError(t, err)
	require.Equal(t, "app~1", again.User, "slots alternate")

	for name, edit := range map[string]func(map[string][]byte){
		"another user's slot":    func(d map[string][]byte) { d[api.SecretKeyUsername] = []byte("other~1") },
		"the certificate's user": func(d map[string][]byte) { d[api.SecretKeyUsername] = []byte("app") },
		"a short password":       func(d map[string][]byte) { d[api.SecretKeyPassword] = []byte("short") },
		"no password":            func(d map[string][]byte) { delete(d, api.SecretKeyPassword) },
	} {
		d := l.put(cert)
		edit(d)
		_, ok := loginOf("app", d)
		require.False(t, ok, name)
	}
	d := next.put(cert)
	d[api.SecretKeyPreviousUsername] = []byte("other~2")
	back, ok = loginOf("app", d)
	require.True(t, ok)
	require.Empty(t, back.Previous, "a previous login that is not one of app's slots is ignored")
}

func TestSlotOwner(t *testing.T) {
	for name, want := range map[string]string{"app~1": "app", "app~2": "app", "a.b-c~1": "a.b-c"} {
		got, ok := api.SlotOwner(name)
		require.True(t, ok, name)
		require.Equal(t, want, got)
	}
	for _, name := range []string{"app", "app~3", "~1", "root", "app~1~1"} {
		_, ok := api.SlotOwner(name)
		require.False(t, ok, name)
	}
}

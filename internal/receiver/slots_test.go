package receiver

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestRemoteAddress(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ remote, want string }{
		{"192.0.2.7:51234", "192.0.2.7"},
		{"[::ffff:192.0.2.7]:51234", "192.0.2.7"},
		// One site is commonly given a whole /48 (a /56 at least): its addresses count as one
		// sender, so that eight slow senders need eight sites, not eight /64s of one.
		{"[2001:db8:1:2:aaaa::1]:443", "2001:db8:1::"},
		{"[2001:db8:1:2:bbbb::9]:443", "2001:db8:1::"},
		{"[2001:db8:1:3::1]:443", "2001:db8:1::"},
		{"[2001:db8:2::1]:443", "2001:db8:2::"},
		{"@", "@"},
	} {
		assert.Equal(t, c.want, remoteAddress(c.remote), c.remote)
	}
}

func TestAddressSlots(t *testing.T) {
	t.Parallel()
	s := newAddressSlots(3, 2)
	assert.True(t, s.take("a"))
	assert.True(t, s.take("a"))
	assert.False(t, s.take("a"), "two per address")
	assert.True(t, s.take("b"))
	assert.False(t, s.take("c"), "three in all")
	s.give("a")
	assert.True(t, s.take("b"), "a slot given back is free for another address")
	assert.False(t, s.take("b"), "two per address")
	s.give("a")
	s.give("b")
	s.give("b")
	assert.Empty(t, s.held, "nothing kept for addresses that hold nothing")
	assert.Zero(t, s.taken)
}

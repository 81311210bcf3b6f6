// Package e2e holds end-to-end tests that run pkgsync against real control planes and a real
// registry from the testenv package.
package e2e

// Package apply rolls rendered phases out to clusters with server-side apply, one non-blocking pass
// at a time, and tears them down in reverse.
package apply

package main

import (
	"errors"

	"pkgsync.dev/pkgsync/source"
)

// packageDirResult turns an error of reading a package directory (readPackageDir) into
// validate's result when it is about the package, not about reading it: each entry a build
// refuses and each limit it exceeds is a problem naming its file, with the message build gives.
// ok is false for any other error, and for none.
func (o *validateOutput) packageDirResult(pkg string, err error) (res *validateResult, ok bool) {
	var problems []validateProblem
	for _, e := range packageDirErrors(err) {
		var notRegular *source.NotRegularError
		var limit *source.LimitError
		switch {
		case errors.As(e, &notRegular):
			problems = append(problems, validateProblem{File: notRegular.Path, Message: notRegular.Error()})
		case errors.As(e, &limit):
			p := validateProblem{Message: limit.Error()}
			if len(limit.Files) > 0 && limit.Limit != source.LimitFiles {
				p.File = limit.Files[0].Path
			}
			problems = append(problems, p)
		default:
			return nil, false
		}
	}
	if len(problems) == 0 {
		return nil, false
	}
	res = o.newValidateResult(pkg, nil, nil)
	res.Problems, res.Valid = problems, false
	return res, true
}

// packageDirErrors lists the problems of a source.DirErrors, or err alone.
func packageDirErrors(err error) []error {
	var all source.DirErrors
	if errors.As(err, &all) {
		return all
	}
	if err == nil {
		return nil
	}
	return []error{err}
}

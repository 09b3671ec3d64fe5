package forward

// FastHTTP is fastHTTP, for the external tests.
var FastHTTP = fastHTTP

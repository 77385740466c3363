// libxml2 is loaded when a document is first read rather than at every start of a program:
// with the ICU and C++ libraries it brings, loading it cost more than half a millisecond and
// two megabytes of every `mystash` command, most of which read no XML.
#include "xml_reading.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// The parts of libxml2's ABI (libxml2.so.2, unchanged since 2.6) used here. Checked against
// its headers where they are installed.
typedef unsigned char LibXMLChar;
typedef struct LibXMLError {
    int domain;
    int code;
    char *message;
    int level;
    char *file;
    int line;
    char *str1, *str2, *str3;
    int int1;
    int int2;  // the column
    void *ctxt;
    void *node;
} LibXMLError;

typedef struct LibXMLSAXHandler {
    void *internalSubset, *isStandalone, *hasInternalSubset, *hasExternalSubset, *resolveEntity, *getEntity,
        *entityDecl, *notationDecl, *attributeDecl, *elementDecl, *unparsedEntityDecl, *setDocumentLocator,
        *startDocument, *endDocument;
    void *startElement, *endElement, *reference;
    void (*characters)(void *context, const LibXMLChar *bytes, int length);
    void (*ignorableWhitespace)(void *context, const LibXMLChar *bytes, int length);
    void *processingInstruction, *comment, *warning, *error, *fatalError, *getParameterEntity;
    void (*cdataBlock)(void *context, const LibXMLChar *bytes, int length);
    void *externalSubset;
    unsigned int initialized;
    void *private_;
    void (*startElementNs)(void *context, const LibXMLChar *localName, const LibXMLChar *prefix,
        const LibXMLChar *uri, int namespaceCount, const LibXMLChar **namespaces, int attributeCount,
        int defaultedCount, const LibXMLChar **attributes);
    void (*endElementNs)(void *context, const LibXMLChar *localName, const LibXMLChar *prefix,
        const LibXMLChar *uri);
    void (*serror)(void *context, LibXMLError *error);
} LibXMLSAXHandler;

#if __has_include(<libxml/parser.h>)
#include <libxml/parser.h>
_Static_assert(sizeof(LibXMLSAXHandler) == sizeof(xmlSAXHandler), "xmlSAXHandler's layout");
_Static_assert(offsetof(LibXMLSAXHandler, startElementNs) == offsetof(xmlSAXHandler, startElementNs), "startElementNs");
_Static_assert(offsetof(LibXMLSAXHandler, endElementNs) == offsetof(xmlSAXHandler, endElementNs), "endElementNs");
_Static_assert(offsetof(LibXMLSAXHandler, characters) == offsetof(xmlSAXHandler, characters), "characters");
_Static_assert(offsetof(LibXMLSAXHandler, cdataBlock) == offsetof(xmlSAXHandler, cdataBlock), "cdataBlock");
_Static_assert(offsetof(LibXMLSAXHandler, initialized) == offsetof(xmlSAXHandler, initialized), "initialized");
_Static_assert(offsetof(LibXMLSAXHandler, serror) == offsetof(xmlSAXHandler, serror), "serror");
_Static_assert(offsetof(xmlParserCtxt, myDoc) == 2 * sizeof(void *), "xmlParserCtxt's myDoc");
_Static_assert(sizeof(LibXMLError) == sizeof(xmlError), "xmlError's layout");
_Static_assert(offsetof(LibXMLError, message) == offsetof(xmlError, message), "message");
_Static_assert(offsetof(LibXMLError, level) == offsetof(xmlError, level), "level");
_Static_assert(offsetof(LibXMLError, line) == offsetof(xmlError, line), "line");
_Static_assert(offsetof(LibXMLError, int2) == offsetof(xmlError, int2), "int2");
#endif

// Entities substituted so that an attribute's `&amp;` arrives as `&` (not libxml2's `&#38;`): with
// no entity declaration handler, only XML's five and character references exist to substitute.
enum {
    LibXMLSAX2Magic = 0xDEEDBEAF,
    LibXMLParseEntities = 1 << 1,
    LibXMLParseNoNetwork = 1 << 11,
    LibXMLParseIgnoreEncoding = 1 << 21,
    LibXMLLevelError = 2,
};

static struct {
    void (*initParser)(void);
    void *(*createPushParser)(LibXMLSAXHandler *, void *, const char *, int, const char *);
    int (*useOptions)(void *, int);
    int (*parseChunk)(void *, const char *, int, int);
    void (*stopParser)(void *);
    void (*freeParser)(void *);
    int (*lineNumber)(void *);
    void (*freeDocument)(void *);
    void (*setStructuredErrors)(void *, void (*)(void *, LibXMLError *));
    void (*setGenericErrors)(void *, void (*)(void *, const char *, ...));
    // The thread's error handlers, to put back after a reading (absent from some versions).
    void *(*structuredErrors)(void);
    void **(*structuredErrorsContext)(void);
    void *(*genericErrors)(void);
    void **(*genericErrorsContext)(void);
    char missing[160];
} libxml;
static pthread_once_t loadOnce = PTHREAD_ONCE_INIT;

static void load(void) {
    void *library = dlopen("libxml2.so.2", RTLD_NOW | RTLD_LOCAL);
    if (library == NULL) {
        snprintf(libxml.missing, sizeof libxml.missing, "%s", dlerror());
        return;
    }
    *(void **)&libxml.initParser = dlsym(library, "xmlInitParser");
    *(void **)&libxml.createPushParser = dlsym(library, "xmlCreatePushParserCtxt");
    *(void **)&libxml.useOptions = dlsym(library, "xmlCtxtUseOptions");
    *(void **)&libxml.parseChunk = dlsym(library, "xmlParseChunk");
    *(void **)&libxml.stopParser = dlsym(library, "xmlStopParser");
    *(void **)&libxml.freeParser = dlsym(library, "xmlFreeParserCtxt");
    *(void **)&libxml.lineNumber = dlsym(library, "xmlSAX2GetLineNumber");
    *(void **)&libxml.freeDocument = dlsym(library, "xmlFreeDoc");
    *(void **)&libxml.setStructuredErrors = dlsym(library, "xmlSetStructuredErrorFunc");
    *(void **)&libxml.setGenericErrors = dlsym(library, "xmlSetGenericErrorFunc");
    *(void **)&libxml.structuredErrors = dlsym(library, "__xmlStructuredError");
    *(void **)&libxml.structuredErrorsContext = dlsym(library, "__xmlStructuredErrorContext");
    *(void **)&libxml.genericErrors = dlsym(library, "__xmlGenericError");
    *(void **)&libxml.genericErrorsContext = dlsym(library, "__xmlGenericErrorContext");
    if (!libxml.initParser || !libxml.createPushParser || !libxml.useOptions || !libxml.parseChunk
        || !libxml.stopParser || !libxml.freeParser || !libxml.lineNumber || !libxml.freeDocument
        || !libxml.setStructuredErrors || !libxml.setGenericErrors) {
        snprintf(libxml.missing, sizeof libxml.missing, "libxml2.so.2 lacks a function it should have");
        return;
    }
    libxml.initParser();
}

typedef struct Reading {
    const XMLReadingCallbacks *callbacks;
    void *parser;
    XMLReadingError *error;
    int stopped;
    int failed;
} Reading;

static void stop(Reading *reading) {
    reading->stopped = 1;
    libxml.stopParser(reading->parser);
}

/// `prefix:name`, or `name`, in `buffer` from `*used` on; NULL when memory ran out.
static char *qualified(char **buffer, size_t *size, size_t *used, const LibXMLChar *prefix, const char *name,
                       size_t nameLength) {
    size_t prefixLength = prefix ? strlen((const char *)prefix) + 1 : 0;
    size_t needed = *used + prefixLength + nameLength + 1;
    if (needed > *size) {
        size_t grown = needed * 2;
        char *larger = realloc(*buffer, grown);
        if (larger == NULL) return NULL;
        *buffer = larger;
        *size = grown;
    }
    char *start = *buffer + *used;
    if (prefix) {
        memcpy(start, prefix, prefixLength - 1);
        start[prefixLength - 1] = ':';
    }
    memcpy(start + prefixLength, name, nameLength);
    start[prefixLength + nameLength] = '\0';
    *used = needed;
    return start;
}

/// SAX2 gives names split at their prefix and attribute values unterminated (from, to): this
/// joins each into a C string, offsets into one buffer until every string is placed.
static void onStart(void *context, const LibXMLChar *localName, const LibXMLChar *prefix, const LibXMLChar *uri,
                    int namespaceCount, const LibXMLChar **namespaces, int attributeCount, int defaultedCount,
                    const LibXMLChar **attributes) {
    (void)uri;
    (void)defaultedCount;
    Reading *reading = context;
    if (reading->stopped || reading->failed) return;
    size_t pairs = (size_t)namespaceCount + (size_t)attributeCount;
    size_t size = 256, used = 0;
    char *buffer = malloc(size);
    size_t *offsets = malloc((pairs * 2 + 1) * sizeof *offsets);
    const char **strings = malloc((pairs * 2 + 2) * sizeof *strings);
    int ok = buffer && offsets && strings;
    size_t count = 0;
    for (int index = 0; ok && index < namespaceCount; index++) {
        const LibXMLChar *declared = namespaces[2 * index], *href = namespaces[2 * index + 1];
        const char *name = declared ? (const char *)declared : "xmlns";
        char *start = qualified(&buffer, &size, &used, declared ? (const LibXMLChar *)"xmlns" : NULL, name,
                                strlen(name));
        offsets[count++] = start ? (size_t)(start - buffer) : 0;
        const char *value = href ? (const char *)href : "";
        start = start ? qualified(&buffer, &size, &used, NULL, value, strlen(value)) : NULL;
        offsets[count++] = start ? (size_t)(start - buffer) : 0;
        ok = start != NULL;
    }
    for (int index = 0; ok && index < attributeCount; index++) {
        const LibXMLChar **attribute = attributes + 5 * index;  // name, prefix, URI, value, value's end
        const char *name = (const char *)attribute[0];
        char *start = qualified(&buffer, &size, &used, attribute[1], name, strlen(name));
        offsets[count++] = start ? (size_t)(start - buffer) : 0;
        start = start ? qualified(&buffer, &size, &used, NULL, (const char *)attribute[3],
                                  (size_t)(attribute[4] - attribute[3])) : NULL;
        offsets[count++] = start ? (size_t)(start - buffer) : 0;
        ok = start != NULL;
    }
    char *name = ok ? qualified(&buffer, &size, &used, prefix, (const char *)localName,
                                strlen((const char *)localName)) : NULL;
    if (name == NULL) {
        free(buffer);
        free(offsets);
        free(strings);
        reading->failed = 1;
        reading->error->line = libxml.lineNumber(reading->parser);
        snprintf(reading->error->message, sizeof reading->error->message, "out of memory");
        libxml.stopParser(reading->parser);
        return;
    }
    size_t nameOffset = (size_t)(name - buffer);
    for (size_t index = 0; index < count; index++) strings[index] = buffer + offsets[index];
    strings[count] = NULL;
    const XMLReadingCallbacks *callbacks = reading->callbacks;
    int line = libxml.lineNumber(reading->parser);
    int stopping = callbacks->startElement(callbacks->context, buffer + nameOffset, strings, line);
    free(buffer);
    free(offsets);
    free(strings);
    if (stopping) stop(reading);
}

static void onEnd(void *context, const LibXMLChar *localName, const LibXMLChar *prefix, const LibXMLChar *uri) {
    (void)uri;
    Reading *reading = context;
    if (reading->stopped || reading->failed) return;
    char small[256];
    char *name = small;
    size_t localLength = strlen((const char *)localName), prefixLength = prefix ? strlen((const char *)prefix) : 0;
    size_t needed = localLength + prefixLength + 2;
    if (needed > sizeof small && (name = malloc(needed)) == NULL) return;
    if (prefix)
        snprintf(name, needed, "%s:%s", (const char *)prefix, (const char *)localName);
    else
        memcpy(name, localName, localLength + 1);
    int stopping = reading->callbacks->endElement(reading->callbacks->context, name);
    if (name != small) free(name);
    if (stopping) stop(reading);
}

static void onText(void *context, const LibXMLChar *bytes, int length) {
    Reading *reading = context;
    if (reading->stopped || reading->failed) return;
    if (reading->callbacks->characters(reading->callbacks->context, (const char *)bytes, length)) stop(reading);
}

static void onError(void *context, LibXMLError *error) {
    Reading *reading = context;
    if (error == NULL || error->level < LibXMLLevelError || reading->failed || reading->stopped) return;
    reading->failed = 1;
    reading->error->code = error->code;
    // An error raised outside the parser's context (an encoding's) carries no line.
    reading->error->line = error->line ? error->line : libxml.lineNumber(reading->parser);
    reading->error->column = error->int2;
    // The first line: libxml2 continues some messages with the bytes of the document at fault.
    const char *message = error->message ? error->message : "";
    int firstLine = (int)strcspn(message, "\n");
    snprintf(reading->error->message, sizeof reading->error->message, "%.*s", firstLine, message);
    // Nor the bytes an encoding error quotes: they may be a secret's.
    char *quoted = strstr(reading->error->message, "bytes 0x");
    if (quoted == NULL) quoted = strstr(reading->error->message, "Bytes: 0x");
    if (quoted != NULL) *quoted = '\0';
    size_t length = strlen(reading->error->message);
    while (length > 0 && strchr("\n ,", reading->error->message[length - 1]) != NULL)
        reading->error->message[--length] = '\0';
}

static void ignoreMessage(void *context, const char *format, ...) {
    (void)context;
    (void)format;
}

typedef struct ErrorHandlers {
    int known;
    void *structured, *structuredContext, *generic, *genericContext;
} ErrorHandlers;

static ErrorHandlers currentErrorHandlers(void) {
    ErrorHandlers handlers = {0, NULL, NULL, NULL, NULL};
    if (libxml.structuredErrors && libxml.structuredErrorsContext && libxml.genericErrors
        && libxml.genericErrorsContext) {
        handlers.known = 1;
        handlers.structured = *(void **)libxml.structuredErrors();
        handlers.structuredContext = *libxml.structuredErrorsContext();
        handlers.generic = *(void **)libxml.genericErrors();
        handlers.genericContext = *libxml.genericErrorsContext();
    }
    return handlers;
}

/// Puts back the thread's handlers as they were, or libxml2's defaults where they are unknown.
static void restoreErrorHandlers(ErrorHandlers handlers) {
    void (*structured)(void *, LibXMLError *) = NULL;
    void (*generic)(void *, const char *, ...) = NULL;
    *(void **)&structured = handlers.known ? handlers.structured : NULL;
    *(void **)&generic = handlers.known ? handlers.generic : NULL;
    libxml.setStructuredErrors(handlers.known ? handlers.structuredContext : NULL, structured);
    libxml.setGenericErrors(handlers.known ? handlers.genericContext : NULL, generic);
}

int xml_reading_read(const char *bytes, int length, int asUTF8, const XMLReadingCallbacks *callbacks,
                     XMLReadingError *error) {
    memset(error, 0, sizeof *error);
    pthread_once(&loadOnce, load);
    if (libxml.missing[0] != '\0') {
        snprintf(error->message, sizeof error->message, "%s", libxml.missing);
        return XMLReadingLibraryMissing;
    }
    LibXMLSAXHandler handler;
    memset(&handler, 0, sizeof handler);
    handler.startElementNs = onStart;
    handler.endElementNs = onEnd;
    handler.characters = onText;
    handler.ignorableWhitespace = onText;
    handler.cdataBlock = onText;
    handler.serror = onError;
    handler.initialized = LibXMLSAX2Magic;
    Reading reading = {callbacks, NULL, error, 0, 0};
    reading.parser = libxml.createPushParser(&handler, &reading, NULL, 0, NULL);
    if (reading.parser == NULL) {
        snprintf(error->message, sizeof error->message, "libxml2 could not make a parser (out of memory?)");
        return XMLReadingNotWellFormed;
    }
    libxml.useOptions(reading.parser,
                      LibXMLParseEntities | LibXMLParseNoNetwork | (asUTF8 ? LibXMLParseIgnoreEncoding : 0));
    // Errors raised outside the parser's context (an encoding that does not convert) go to the
    // thread's handlers, which print to stderr: this reading's take them, then the old come back.
    ErrorHandlers previous = currentErrorHandlers();
    libxml.setStructuredErrors(&reading, onError);
    libxml.setGenericErrors(NULL, ignoreMessage);
    // In pieces: libxml2 2.9 refuses a document of more than 10 MB given in one.
    enum { pieceSize = 1 << 16 };
    int code = 0;
    for (int offset = 0; offset < length && code == 0 && !reading.stopped && !reading.failed; offset += pieceSize) {
        int size = length - offset < pieceSize ? length - offset : pieceSize;
        code = libxml.parseChunk(reading.parser, bytes + offset, size, 0);
    }
    if (code == 0 && !reading.stopped && !reading.failed) code = libxml.parseChunk(reading.parser, NULL, 0, 1);
    restoreErrorHandlers(previous);
    // With entities substituted, libxml2 keeps declared ones in a document of its own.
    void **fields = (void **)reading.parser;
    if (fields[2] != NULL) {
        libxml.freeDocument(fields[2]);
        fields[2] = NULL;
    }
    libxml.freeParser(reading.parser);
    if (reading.stopped) return XMLReadingStopped;
    if (reading.failed) return XMLReadingNotWellFormed;
    if (code != 0) {
        error->code = code;
        snprintf(error->message, sizeof error->message, "libxml2 error %d", code);
        return XMLReadingNotWellFormed;
    }
    return XMLReadingFinished;
}

"""The IDL parser: tokens -> :class:`~idl_codegen.syntax.Specification`.

A recursive-descent parser for the part of OMG IDL 4 that DDS schemas use. Every
error names what was expected and what was found. After an error the parser skips to
the end of the member or definition (the next ``;`` at the same brace depth, or the
``}`` that closes the enclosing scope) and goes on, so one run reports several errors.
"""

from __future__ import annotations

from idl_codegen.diagnostics import Diagnostics, Location
from idl_codegen.lexer import Token, TokenKind
from idl_codegen.syntax import (
    Annotation,
    BaseTypeSpec,
    Binary,
    Case,
    ConstDef,
    Declarator,
    Definition,
    EnumDef,
    Enumerator,
    Expr,
    Literal,
    Member,
    ModuleDef,
    NamedSpec,
    NameRef,
    Pragma,
    ScopedName,
    SequenceSpec,
    Specification,
    StringSpec,
    StructDef,
    TypedefDef,
    TypeSpec,
    Unary,
    UnionDef,
)

__all__ = ["KEYWORDS", "parse"]

KEYWORDS = frozenset({
    "abstract", "any", "alias", "attribute", "bitfield", "bitmask", "bitset", "boolean",
    "case", "char", "component", "connector", "const", "consumes", "context", "custom",
    "default", "double", "emits", "enum", "eventtype", "exception", "factory", "FALSE",
    "finder", "fixed", "float", "getraises", "home", "import", "in", "inout",
    "interface", "local", "long", "manages", "map", "mirrorport", "module", "multiple",
    "native", "Object", "octet", "oneway", "out", "primarykey", "private", "port",
    "porttype", "provides", "public", "publishes", "raises", "readonly", "setraises", "sequence",
    "short", "string", "struct", "supports", "switch", "TRUE", "truncatable", "typedef",
    "typeid", "typename", "typeprefix", "unsigned", "union", "uses", "ValueBase", "valuetype",
    "void", "wchar", "wstring", "int8", "uint8", "int16", "int32", "int64",
    "uint16", "uint32", "uint64",
})
_SIMPLE_BASE_TYPES = frozenset({
    "short", "float", "double", "char", "wchar", "boolean", "octet", "int8",
    "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64",
})
_UNSUPPORTED_TYPES = {
    "any": "'any' is not supported",
    "Object": "'Object' is not supported",
    "ValueBase": "'ValueBase' is not supported",
    "fixed": "'fixed' is not supported",
    "map": "'map' is not supported by cyclonedds-python",
}
_UNSUPPORTED_DEFINITIONS = frozenset({
    "interface", "abstract", "local", "native", "exception", "valuetype", "eventtype", "component",
    "home", "bitmask", "bitset", "porttype", "connector", "custom", "import", "typeid",
    "typeprefix",
})
_DEFINITION_EXPECTED = "a definition (module, struct, union, enum, typedef or const)"


class _SyntaxError(Exception):
    def __init__(self, location: Location, message: str) -> None:
        super().__init__(message)
        self.location = location
        self.message = message


def parse(tokens: list[Token], diagnostics: Diagnostics) -> Specification:
    """Parse ``tokens`` (ending with EOF); errors go to ``diagnostics``."""
    return _Parser(tokens, diagnostics).specification()


class _Parser:
    def __init__(self, tokens: list[Token], diagnostics: Diagnostics) -> None:
        self._tokens = tokens
        self._pos = 0
        self._diag = diagnostics
        self._eof_reported = False

    # -- token helpers -----------------------------------------------------------------

    def _peek(self, offset: int = 0) -> Token:
        index = min(self._pos + offset, len(self._tokens) - 1)
        return self._tokens[index]

    def _advance(self) -> Token:
        token = self._tokens[self._pos]
        if token.kind is not TokenKind.EOF:
            self._pos += 1
        return token

    def _at(self, text: str) -> bool:
        token = self._peek()
        return token.kind is TokenKind.PUNCT and token.text == text

    def _at_keyword(self, word: str, offset: int = 0) -> bool:
        token = self._peek(offset)
        return token.kind is TokenKind.IDENT and not token.escaped and token.text == word

    def _fail(self, expected: str, token: Token | None = None) -> _SyntaxError:
        token = token or self._peek()
        return _SyntaxError(token.location, f"expected {expected}, got {token.describe()}")

    def _expect(self, text: str, context: str = "") -> Token:
        if self._at(text):
            return self._advance()
        if text == ">" and self._at(">>"):
            token = self._advance()
            where = token.location
            second = Location(where.file, where.line, where.column + 1)
            self._pos -= 1
            self._tokens[self._pos] = Token(TokenKind.PUNCT, ">", ">", second)
            return token
        raise self._fail(f"'{text}'" + (f" {context}" if context else ""))

    def _identifier(self, what: str = "an identifier") -> Token:
        token = self._peek()
        if token.kind is TokenKind.IDENT and (token.escaped or token.text not in KEYWORDS):
            return self._advance()
        if token.kind is TokenKind.IDENT:
            raise _SyntaxError(
                token.location, f"expected {what}, got keyword '{token.text}'"
            )
        raise self._fail(what)

    def _report(self, error: _SyntaxError) -> None:
        at_end = error.message.endswith("got end of input")
        if at_end and self._eof_reported:
            return  # the enclosing scopes are unclosed too: one error says it
        self._eof_reported = self._eof_reported or at_end
        self._diag.error(error.location, error.message)

    def _skip_past_semicolon(self) -> None:
        """Skip to just after the next ';' at this brace depth, or to a closing '}'."""
        depth = 0
        while True:
            token = self._peek()
            if token.kind is TokenKind.EOF:
                return
            if token.kind is TokenKind.PUNCT:
                if token.text == "{":
                    depth += 1
                elif token.text == "}":
                    if depth == 0:
                        return
                    depth -= 1
                    if depth == 0 and self._peek(1).kind is TokenKind.PUNCT \
                            and self._peek(1).text == ";":
                        self._advance()
                        self._advance()
                        return
                elif token.text == ";" and depth == 0:
                    self._advance()
                    return
            self._advance()

    # -- definitions -------------------------------------------------------------------

    def specification(self) -> Specification:
        spec = Specification()
        spec.definitions = self._definitions(top_level=True)
        return spec

    def _definitions(self, top_level: bool) -> list[Definition]:
        definitions: list[Definition] = []
        while True:
            token = self._peek()
            if token.kind is TokenKind.EOF:
                return definitions
            if self._at("}"):
                if top_level:
                    self._report(self._fail(_DEFINITION_EXPECTED))
                    self._advance()
                    continue
                return definitions
            start = self._pos
            try:
                definition = self._definition()
            except _SyntaxError as error:
                self._report(error)
                self._skip_past_semicolon()
                if self._pos == start:
                    self._advance()
                continue
            if definition is not None:
                definitions.append(definition)

    def _definition(self) -> Definition | None:
        token = self._peek()
        if token.kind is TokenKind.PRAGMA:
            self._advance()
            return Pragma(token.text.split(), token.location)
        annotations = self._annotations()
        if annotations is None:  # an annotation declaration, skipped
            return None
        token = self._peek()
        definition: Definition
        if self._at_keyword("module"):
            definition = self._module(annotations)
            kind = f"module '{definition.name}'"
        elif self._at_keyword("struct"):
            definition = self._struct(annotations)
            kind = f"struct '{definition.name}'"
        elif self._at_keyword("union"):
            definition = self._union(annotations)
            kind = f"union '{definition.name}'"
        elif self._at_keyword("enum"):
            definition = self._enum(annotations)
            kind = f"enum '{definition.name}'"
        elif self._at_keyword("typedef"):
            definition = self._typedef(annotations)
            kind = "typedef"
        elif self._at_keyword("const"):
            definition = self._const(annotations)
            kind = f"const '{definition.name}'"
        elif token.kind is TokenKind.IDENT and token.text in _UNSUPPORTED_DEFINITIONS \
                and not token.escaped:
            raise _SyntaxError(token.location, f"'{token.text}' declarations are not supported")
        else:
            raise self._fail(_DEFINITION_EXPECTED)
        if self._at(";"):
            self._advance()
        else:
            # report, but do not skip: the next definition is most likely intact
            self._report(self._fail(f"';' after {kind}"))
        return definition

    def _module(self, annotations: list[Annotation]) -> ModuleDef:
        keyword = self._advance()
        name = self._identifier("a module name")
        self._expect("{", f"after module '{name.text}'")
        definitions = self._definitions(top_level=False)
        self._expect("}", f"to close module '{name.text}'")
        return ModuleDef(name.text, definitions, annotations, keyword.location)

    def _struct(self, annotations: list[Annotation]) -> StructDef:
        self._advance()
        name = self._identifier("a struct name")
        base = None
        if self._at(":"):
            self._advance()
            base = self._scoped_name("a base struct name")
        if self._at(";") and base is None:
            return StructDef(name.text, None, None, annotations, name.location)
        self._expect("{", f"after struct '{name.text}'")
        members: list[Member] = []
        while not self._at("}"):
            if self._peek().kind is TokenKind.EOF:
                raise self._fail(f"'}}' to close struct '{name.text}'")
            start = self._pos
            try:
                members.append(self._member())
            except _SyntaxError as error:
                self._report(error)
                self._skip_past_semicolon()
                if self._pos == start:
                    self._advance()
        self._advance()
        return StructDef(name.text, base, members, annotations, name.location)

    def _member(self) -> Member:
        annotations = self._annotations() or []
        start = self._peek().location
        type_spec = self._type_spec("a member type")
        declarators = [self._declarator("a member name")]
        while self._at(","):
            self._advance()
            declarators.append(self._declarator("a member name"))
        self._expect(";", "after member declaration")
        return Member(type_spec, declarators, annotations, start)

    def _union(self, annotations: list[Annotation]) -> UnionDef:
        self._advance()
        name = self._identifier("a union name")
        if self._at(";"):
            return UnionDef(name.text, None, [], [], annotations, name.location)
        if not self._at_keyword("switch"):
            raise self._fail(f"'switch' after union '{name.text}'")
        self._advance()
        self._expect("(", "after 'switch'")
        switch_annotations = self._annotations() or []
        switch_type = self._type_spec("a discriminator type")
        self._expect(")", "after the discriminator type")
        self._expect("{", f"after union '{name.text}' switch")
        cases: list[Case] = []
        while not self._at("}"):
            if self._peek().kind is TokenKind.EOF:
                raise self._fail(f"'}}' to close union '{name.text}'")
            start = self._pos
            try:
                cases.append(self._case())
            except _SyntaxError as error:
                self._report(error)
                self._skip_past_semicolon()
                if self._pos == start:
                    self._advance()
        self._advance()
        if not cases:
            self._diag.error(name.location, f"union '{name.text}' has no cases")
        return UnionDef(name.text, switch_type, switch_annotations, cases, annotations,
                        name.location)

    def _case(self) -> Case:
        labels: list[Expr | None] = []
        label_locations: list[Location] = []
        start = self._peek().location
        while self._at_keyword("case") or self._at_keyword("default"):
            keyword = self._advance()
            if keyword.text == "case":
                labels.append(self._const_expr())
            else:
                labels.append(None)
            label_locations.append(keyword.location)
            self._expect(":", "after case label")
        if not labels:
            raise self._fail("'case' or 'default'")
        annotations = self._annotations() or []
        type_spec = self._type_spec("a union member type")
        declarator = self._declarator("a union member name")
        self._expect(";", "after union member declaration")
        return Case(labels, type_spec, declarator, annotations, start, label_locations)

    def _enum(self, annotations: list[Annotation]) -> EnumDef:
        self._advance()
        name = self._identifier("an enum name")
        self._expect("{", f"after enum '{name.text}'")
        enumerators: list[Enumerator] = []
        try:
            while True:
                literal_annotations = self._annotations() or []
                literal = self._identifier("an enumerator name")
                enumerators.append(Enumerator(literal.text, literal_annotations,
                                              literal.location))
                if self._at(","):
                    self._advance()
                    if self._at("}"):  # IDL 4 (and idlc) allow no trailing comma
                        raise self._fail(f"an enumerator name after ',' in enum '{name.text}'")
                    continue
                if self._at("}"):
                    break
                raise self._fail(f"',' or '}}' in enum '{name.text}'")
        except _SyntaxError as error:
            self._report(error)
            self._skip_to_close()
        self._expect("}", f"to close enum '{name.text}'")
        return EnumDef(name.text, enumerators, annotations, name.location)

    def _skip_to_close(self) -> None:
        """Skip to the '}' that closes the braces we are in (not consuming it)."""
        depth = 0
        while self._peek().kind is not TokenKind.EOF:
            token = self._peek()
            if token.kind is TokenKind.PUNCT and token.text == "{":
                depth += 1
            elif token.kind is TokenKind.PUNCT and token.text == "}":
                if depth == 0:
                    return
                depth -= 1
            self._advance()

    def _typedef(self, annotations: list[Annotation]) -> TypedefDef:
        keyword = self._advance()
        annotations = annotations + (self._annotations() or [])
        type_spec = self._type_spec("a type after 'typedef'")
        declarators = [self._declarator("a typedef name")]
        while self._at(","):
            self._advance()
            declarators.append(self._declarator("a typedef name"))
        return TypedefDef(type_spec, declarators, annotations, keyword.location)

    def _const(self, annotations: list[Annotation]) -> ConstDef:
        self._advance()
        type_spec = self._type_spec("a constant type")
        name = self._identifier("a constant name")
        self._expect("=", f"after constant '{name.text}'")
        value = self._const_expr()
        return ConstDef(type_spec, name.text, value, annotations, name.location)

    # -- annotations -------------------------------------------------------------------

    def _annotations(self) -> list[Annotation] | None:
        """Annotations before a definition; None after an ``@annotation`` declaration."""
        annotations: list[Annotation] = []
        while self._at("@"):
            at = self._advance()
            if self._at_keyword("annotation") and self._peek(1).kind is TokenKind.IDENT:
                self._skip_annotation_declaration()
                return None
            name = self._annotation_name()
            params: list[tuple[str | None, Expr]] = []
            if self._at("("):
                self._advance()
                if not self._at(")"):
                    params = self._annotation_params()
                self._expect(")", f"to close annotation '@{name}'")
            annotations.append(Annotation(str(name), tuple(params), at.location))
        return annotations

    def _annotation_name(self) -> ScopedName:
        """Annotation names may be keywords (``@default``)."""
        start = self._peek().location
        parts: list[str] = []
        absolute = False
        if self._at("::"):
            self._advance()
            absolute = True
        while True:
            token = self._peek()
            if token.kind is not TokenKind.IDENT:
                raise self._fail("an annotation name")
            parts.append(self._advance().text)
            if not self._at("::"):
                return ScopedName(tuple(parts), absolute, start)
            self._advance()

    def _annotation_params(self) -> list[tuple[str | None, Expr]]:
        token = self._peek()
        following = self._peek(1)
        if token.kind is TokenKind.IDENT and following.kind is TokenKind.PUNCT \
                and following.text == "=":
            params: list[tuple[str | None, Expr]] = []
            while True:
                key = self._identifier("an annotation parameter name")
                self._expect("=", f"after annotation parameter '{key.text}'")
                params.append((key.text, self._const_expr()))
                if not self._at(","):
                    return params
                self._advance()
        return [(None, self._const_expr())]

    def _skip_annotation_declaration(self) -> None:
        self._advance()  # 'annotation'
        self._advance()  # its name
        self._expect("{", "after annotation name")
        depth = 1
        while depth and self._peek().kind is not TokenKind.EOF:
            token = self._advance()
            if token.kind is TokenKind.PUNCT and token.text in "{}":
                depth += 1 if token.text == "{" else -1
        self._expect(";", "after annotation declaration")

    # -- types -------------------------------------------------------------------------

    def _type_spec(self, what: str) -> TypeSpec:
        token = self._peek()
        if token.kind is TokenKind.IDENT and not token.escaped:
            word = token.text
            if word in _SIMPLE_BASE_TYPES:
                self._advance()
                return BaseTypeSpec(word, token.location)
            if word == "long":
                self._advance()
                if self._at_keyword("long"):
                    self._advance()
                    return BaseTypeSpec("long long", token.location)
                if self._at_keyword("double"):
                    self._advance()
                    return BaseTypeSpec("long double", token.location)
                return BaseTypeSpec("long", token.location)
            if word == "unsigned":
                self._advance()
                if self._at_keyword("short"):
                    self._advance()
                    return BaseTypeSpec("unsigned short", token.location)
                if self._at_keyword("long"):
                    self._advance()
                    if self._at_keyword("long"):
                        self._advance()
                        return BaseTypeSpec("unsigned long long", token.location)
                    return BaseTypeSpec("unsigned long", token.location)
                raise self._fail("'short' or 'long' after 'unsigned'")
            if word in ("string", "wstring"):
                self._advance()
                bound = None
                if self._at("<"):
                    self._advance()
                    bound = self._const_expr(in_template=True)
                    self._expect(">", f"to close {word}<...>")
                return StringSpec(bound, word == "wstring", token.location)
            if word == "sequence":
                self._advance()
                self._expect("<", "after 'sequence'")
                element = self._type_spec("a sequence element type")
                seq_bound = None
                if self._at(","):
                    self._advance()
                    seq_bound = self._const_expr(in_template=True)
                self._expect(">", "to close sequence<...>")
                return SequenceSpec(element, seq_bound, token.location)
            if word in _UNSUPPORTED_TYPES:
                raise _SyntaxError(token.location, _UNSUPPORTED_TYPES[word])
            if word in ("struct", "union", "enum"):
                raise _SyntaxError(
                    token.location,
                    f"a {word} cannot be declared inside another type; declare it before",
                )
        if token.kind is TokenKind.IDENT or self._at("::"):
            name = self._scoped_name(what)
            return NamedSpec(name, name.location)
        raise self._fail(what)

    def _scoped_name(self, what: str) -> ScopedName:
        start = self._peek().location
        absolute = False
        if self._at("::"):
            self._advance()
            absolute = True
        parts = [self._identifier(what).text]
        while self._at("::"):
            self._advance()
            parts.append(self._identifier("an identifier after '::'").text)
        return ScopedName(tuple(parts), absolute, start)

    def _declarator(self, what: str) -> Declarator:
        name = self._identifier(what)
        dims: list[Expr] = []
        while self._at("["):
            self._advance()
            dims.append(self._const_expr())
            self._expect("]", "to close array dimension")
        return Declarator(name.text, tuple(dims), name.location)

    # -- constant expressions ----------------------------------------------------------

    def _const_expr(self, in_template: bool = False) -> Expr:
        return self._binary(0, in_template)

    _LEVELS: tuple[tuple[str, ...], ...] = (
        ("|",), ("^",), ("&",), ("<<", ">>"), ("+", "-"), ("*", "/", "%"),
    )

    def _binary(self, level: int, in_template: bool) -> Expr:
        if level == len(self._LEVELS):
            return self._unary(in_template)
        left = self._binary(level + 1, in_template)
        while True:
            token = self._peek()
            if token.kind is not TokenKind.PUNCT or token.text not in self._LEVELS[level]:
                return left
            if in_template and token.text == ">>":
                return left
            self._advance()
            right = self._binary(level + 1, in_template)
            left = Binary(token.text, left, right, token.location)

    def _unary(self, in_template: bool) -> Expr:
        token = self._peek()
        if token.kind is TokenKind.PUNCT and token.text in ("-", "+", "~"):
            self._advance()
            return Unary(token.text, self._unary(in_template), token.location)
        return self._primary(in_template)

    def _primary(self, in_template: bool) -> Expr:
        token = self._peek()
        if token.kind is TokenKind.INT:
            self._advance()
            return Literal("integer", token.value, token.location)
        if token.kind is TokenKind.FLOAT:
            self._advance()
            return Literal("float", token.value, token.location)
        if token.kind in (TokenKind.CHAR, TokenKind.WCHAR):
            self._advance()
            kind = "char" if token.kind is TokenKind.CHAR else "wchar"
            return Literal(kind, token.value, token.location)
        if token.kind in (TokenKind.STRING, TokenKind.WSTRING):
            parts = []
            wide = False
            while self._peek().kind in (TokenKind.STRING, TokenKind.WSTRING):
                piece = self._advance()
                wide = wide or piece.kind is TokenKind.WSTRING
                parts.append(str(piece.value))
            return Literal("wstring" if wide else "string", "".join(parts), token.location)
        if token.kind is TokenKind.IDENT and not token.escaped \
                and token.text.upper() in ("TRUE", "FALSE"):  # idlc: any case
            self._advance()
            return Literal("boolean", token.text.upper() == "TRUE", token.location)
        if self._at("("):
            self._advance()
            inner = self._binary(0, False)
            self._expect(")", "to close parenthesis")
            return inner
        if token.kind is TokenKind.IDENT or self._at("::"):
            name = self._scoped_name("a constant")
            return NameRef(name, name.location)
        raise self._fail("a constant expression")

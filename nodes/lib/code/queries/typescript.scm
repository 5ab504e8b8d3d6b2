; TypeScript and TSX: the JavaScript tags plus interfaces, type aliases, enums, abstract classes
; and type references.
(class_declaration name: (type_identifier) @name.definition.class)
(abstract_class_declaration name: (type_identifier) @name.definition.class)
(interface_declaration name: (type_identifier) @name.definition.interface)
(type_alias_declaration name: (type_identifier) @name.definition.type)
(enum_declaration name: (identifier) @name.definition.enum)
(function_declaration name: (identifier) @name.definition.function)
(generator_function_declaration name: (identifier) @name.definition.function)
(function_signature name: (identifier) @name.definition.function)
(method_definition name: (property_identifier) @name.definition.method)
(abstract_method_signature name: (property_identifier) @name.definition.method)
(module name: (identifier) @name.definition.module)
(program (lexical_declaration (variable_declarator name: (identifier) @name.definition.constant)))
(export_statement (lexical_declaration (variable_declarator name: (identifier) @name.definition.constant)))
(call_expression function: [(identifier) @name.reference.call
                            (member_expression property: (property_identifier) @name.reference.call)])
(new_expression constructor: (identifier) @name.reference.class)
(import_specifier name: (identifier) @name.reference.import)
(import_clause (identifier) @name.reference.import)
(type_identifier) @name.reference.type
